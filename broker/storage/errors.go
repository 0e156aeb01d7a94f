package storage

import "errors"

// Sentinel errors. Callers map them to Kafka error codes with errors.Is; the
// returned errors wrap them with context.
var (
	// ErrOffsetOutOfRange: a read below the log start offset or above the
	// log end offset (OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrCorruptBatch: a record batch failed validation: bad size, magic,
	// CRC, or inconsistent fields (CORRUPT_MESSAGE).
	ErrCorruptBatch = errors.New("corrupt record batch")
	// ErrIncompleteBatch: the bytes end inside a record batch (a torn tail
	// on disk, or a partial trailing batch in a fetch response).
	ErrIncompleteBatch = errors.New("incomplete record batch")
	// ErrUnsupportedMagic: a batch with a magic other than 2
	// (UNSUPPORTED_VERSION for produce, corruption on disk).
	ErrUnsupportedMagic = errors.New("unsupported record batch magic")
	// ErrUnsupportedCompression: a compression codec this engine cannot
	// decode (UNSUPPORTED_COMPRESSION_TYPE).
	ErrUnsupportedCompression = errors.New("unsupported compression codec")
	// ErrRecordTooLarge: a batch larger than max.message.bytes or the
	// segment size (MESSAGE_TOO_LARGE).
	ErrRecordTooLarge = errors.New("record batch too large")
	// ErrInvalidRecord: a batch whose records are inconsistent with its
	// header (INVALID_RECORD).
	ErrInvalidRecord = errors.New("invalid record")
	// ErrOutOfOrderSequence: an idempotent batch whose sequence does not
	// follow the producer's last one (OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrInvalidProducerEpoch: an idempotent batch from an older producer
	// epoch (INVALID_PRODUCER_EPOCH).
	ErrInvalidProducerEpoch = errors.New("invalid producer epoch")
	// ErrInvalidTimestamp: a timestamp outside the allowed range
	// (INVALID_TIMESTAMP).
	ErrInvalidTimestamp = errors.New("invalid timestamp")
	// ErrNonMonotonicOffset: a follower append that does not continue at the
	// log end offset, or whose offsets do not increase.
	ErrNonMonotonicOffset = errors.New("offsets not monotonically increasing")
	// ErrLogDirOffline: the log's dir failed (an I/O error, or an fsync
	// that failed and so left the durable state unknown); none of its logs
	// is read or written again by this process (KAFKA_STORAGE_ERROR).
	ErrLogDirOffline = errors.New("log dir offline")
	// ErrLogClosed: the log was closed or deleted.
	ErrLogClosed = errors.New("log closed")
	// ErrCorruptCheckpoint: a checkpoint, snapshot or properties file that
	// cannot be parsed.
	ErrCorruptCheckpoint = errors.New("corrupt checkpoint file")
	// ErrInvalidOffset: an offset argument outside what the call allows.
	ErrInvalidOffset = errors.New("invalid offset")
)
