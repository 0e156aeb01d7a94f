package checker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// LineBytesMax bounds one line of history.jsonl. A poll returning thousands
// of records stays far below it; a longer line is reported, not buffered.
const LineBytesMax = 16 << 20

// Reader decodes history.jsonl one operation at a time, so a history can be
// streamed without holding its text in memory. Blank lines are skipped.
type Reader struct {
	sc   *bufio.Scanner
	line int
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), LineBytesMax)
	return &Reader{sc: sc}
}

// Read returns the next operation, or io.EOF after the last one. A malformed
// line yields an error naming its line number (from 1).
func (r *Reader) Read() (Op, error) {
	for r.sc.Scan() {
		r.line++
		line := bytes.TrimSpace(r.sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var op Op
		if err := op.UnmarshalJSON(line); err != nil {
			return Op{}, fmt.Errorf("history line %d: %w", r.line, err)
		}
		return op, nil
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Op{}, fmt.Errorf("history line %d: longer than %d bytes", r.line+1, LineBytesMax)
		}
		return Op{}, fmt.Errorf("history line %d: %w", r.line+1, err)
	}
	return Op{}, io.EOF
}

// Line is the number of the line the last Read returned (from 1).
func (r *Reader) Line() int { return r.line }

// ReadAll reads every remaining operation.
func (r *Reader) ReadAll() (History, error) {
	var h History
	for {
		op, err := r.Read()
		if errors.Is(err, io.EOF) {
			return h, nil
		}
		if err != nil {
			return h, err
		}
		h = append(h, op)
	}
}

// Writer encodes operations as history.jsonl, one line each. It buffers;
// call Flush before closing the underlying file. A Writer is not safe for
// concurrent use: the recorder that assigns indexes should own it.
type Writer struct {
	w   *bufio.Writer
	buf []byte
}

// NewWriter returns a Writer onto w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 256<<10)}
}

// Write appends one operation and a newline.
func (w *Writer) Write(op Op) error {
	w.buf = op.appendJSON(w.buf[:0])
	w.buf = append(w.buf, '\n')
	if _, err := w.w.Write(w.buf); err != nil {
		return fmt.Errorf("write history op %d: %w", op.Index, err)
	}
	return nil
}

// Flush writes any buffered operations to the underlying writer.
func (w *Writer) Flush() error {
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("flush history: %w", err)
	}
	return nil
}

// ReadHistory reads a history.jsonl file; a decoding error names the line.
// The invoke/complete discipline is not enforced here (History.Validate
// checks it; Analyze reports violations as warnings).
func ReadHistory(path string) (History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	defer f.Close()
	h, err := NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read history %s: %w", path, err)
	}
	return h, nil
}

// WriteHistory writes h to path as history.jsonl.
func WriteHistory(path string, h History) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	w := NewWriter(f)
	for _, op := range h {
		if err := w.Write(op); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write history %s: %w", path, err)
	}
	return nil
}
