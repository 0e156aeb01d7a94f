package faultfs

import (
	"fmt"
	"math/rand"
	"path"
	"sort"
)

// Ino names a file or directory of the backing dir by its inode number, so
// that a name change (rename, link) keeps its identity.
type Ino uint64

// Span is a run of bytes at an offset of a file.
type Span struct {
	Off  int64
	Data []byte
}

// Range is the half-open byte range [Off, End) of a file.
type Range struct{ Off, End int64 }

// Model is what a disk has made durable, as a pure data structure: the
// adapter reports every change it made to the backing dir (which always
// holds the latest state), and the model keeps just enough to roll the
// backing dir back to its durable state: the durable bytes a change
// replaced (an undo overlay), the durable size, the unsynced operations in
// order (for torn and reordered persistence), and per directory the durable
// entry of every name it has seen. A name is durable after an fsync of its
// directory; a file's data and size after an fsync of the file.
//
// Files and directories the model has not been told about are durable as
// they are: the model learns them from lookups (Learn) before any change.
// A file or directory that is unlinked or replaced while some durable name
// still refers to it is kept in a stage area (Unlink says when), so that a
// power loss can bring it back.
type Model struct {
	root    Ino
	nodes   map[Ino]*mnode
	garbage []Ino
}

type link struct {
	parent Ino
	name   string
}

type mnode struct {
	ino     Ino
	dir     bool
	links   map[link]bool // current names
	durRefs int           // durable entries naming it
	staged  bool          // present in the stage area as stage/<ino>

	// Directories: the entries of every name seen; a missing key is absent.
	cur map[string]Ino
	dur map[string]Ino

	// Files.
	size    int64    // current size
	dSize   int64    // durable size
	overlay []extent // durable bytes where the current bytes may differ, sorted, disjoint
	pending []fileOp // unsynced changes, oldest first
}

// extent holds durable bytes. A doomed extent stays durable through later
// successful fsyncs: its dirty data was lost by a failed fsync.
type extent struct {
	off    int64
	data   []byte
	doomed bool
}

func (e extent) end() int64 { return e.off + int64(len(e.data)) }

type fileOp struct {
	truncate bool
	off      int64  // write
	data     []byte // write
	size     int64  // truncate
}

// NewModel starts a model whose root directory is root; everything below
// it is durable until a change is reported.
func NewModel(root Ino) *Model {
	m := &Model{root: root, nodes: map[Ino]*mnode{}}
	m.nodes[root] = newDir(root)
	m.nodes[root].durRefs = 1 // the root is always reachable
	return m
}

func newDir(ino Ino) *mnode {
	return &mnode{ino: ino, dir: true, links: map[link]bool{}, cur: map[string]Ino{}, dur: map[string]Ino{}}
}

func newFile(ino Ino, size int64) *mnode {
	return &mnode{ino: ino, links: map[link]bool{}, size: size, dSize: size}
}

// Known reports whether the model tracks ino.
func (m *Model) Known(ino Ino) bool { _, ok := m.nodes[ino]; return ok }

// Entry is the current entry of name in directory parent, if the model has
// seen it.
func (m *Model) Entry(parent Ino, name string) (Ino, bool) {
	d := m.nodes[parent]
	if d == nil || !d.dir {
		return 0, false
	}
	x, ok := d.cur[name]
	return x, ok
}

// Learn records an entry found in the backing dir that the model has not
// seen: it exists, and is durable. An entry the model already knows is left
// as it is.
func (m *Model) Learn(parent Ino, name string, ino Ino, dir bool, size int64) {
	d := m.nodes[parent]
	if d == nil || !d.dir {
		return
	}
	if _, seen := d.cur[name]; seen {
		return
	}
	if _, seen := d.dur[name]; seen {
		return
	}
	x := m.nodes[ino]
	if x == nil {
		if dir {
			x = newDir(ino)
		} else {
			x = newFile(ino, size)
		}
		m.nodes[ino] = x
	}
	m.addLink(d, name, x)
	m.setDur(d, name, ino)
}

// Create records a new file or directory created as name in parent. Its
// name is not durable until parent is fsynced; a new file's durable size
// is 0.
func (m *Model) Create(parent Ino, name string, ino Ino, dir bool) {
	d := m.nodes[parent]
	if d == nil || !d.dir {
		return
	}
	if old, ok := m.nodes[ino]; ok && old.dir == dir && old.links[link{parent, name}] {
		return // an open with O_CREAT of an entry the model knows
	}
	var x *mnode
	if dir {
		x = newDir(ino)
	} else {
		x = newFile(ino, 0)
	}
	m.nodes[ino] = x
	m.addLink(d, name, x)
}

// Link records a new name for the file ino.
func (m *Model) Link(parent Ino, name string, ino Ino) {
	d, x := m.nodes[parent], m.nodes[ino]
	if d == nil || x == nil || !d.dir {
		return
	}
	m.addLink(d, name, x)
}

// NeedStage reports whether the entry name of parent, about to be removed
// or replaced, must first be kept in the stage area as stage/<ino>: some
// durable name still refers to it and it is not staged yet.
func (m *Model) NeedStage(parent Ino, name string) (Ino, bool) {
	x := m.entryNode(parent, name)
	if x == nil {
		return 0, false
	}
	return x.ino, x.durRefs > 0 && !x.staged
}

// Staged records that the adapter put ino into the stage area.
func (m *Model) Staged(ino Ino) {
	if x := m.nodes[ino]; x != nil {
		x.staged = true
	}
}

// Unlink records that name was removed from parent (unlink or rmdir).
func (m *Model) Unlink(parent Ino, name string) {
	d := m.nodes[parent]
	x := m.entryNode(parent, name)
	if x == nil {
		return
	}
	m.removeLink(d, name, x)
	m.collect(x)
}

// Rename records that oldName of oldParent is now newName of newParent,
// replacing what newName named.
func (m *Model) Rename(oldParent Ino, oldName string, newParent Ino, newName string) {
	od, nd := m.nodes[oldParent], m.nodes[newParent]
	x := m.entryNode(oldParent, oldName)
	if x == nil || nd == nil || !nd.dir {
		return
	}
	v := m.entryNode(newParent, newName)
	if v == x {
		return // two names of one file: rename changes nothing
	}
	if v != nil {
		m.removeLink(nd, newName, v)
		m.collect(v)
	}
	m.removeLink(od, oldName, x)
	m.addLink(nd, newName, x)
}

// ToSave lists the durable bytes a write of [off, end) would replace and
// the overlay does not hold yet: the adapter reads them from the backing
// file before the write and passes them to Write.
func (m *Model) ToSave(ino Ino, off, end int64) []Range {
	x := m.file(ino)
	if x == nil {
		return nil
	}
	return x.gaps(off, min(end, x.dSize))
}

// ToSaveTruncate is ToSave for a truncation to size.
func (m *Model) ToSaveTruncate(ino Ino, size int64) []Range {
	x := m.file(ino)
	if x == nil || size >= x.size {
		return nil
	}
	return x.gaps(size, min(x.size, x.dSize))
}

// Size is the current size of a file the model tracks.
func (m *Model) Size(ino Ino) (int64, bool) {
	x := m.file(ino)
	if x == nil {
		return 0, false
	}
	return x.size, true
}

// Write records data written at off, and the durable bytes it replaced
// (the ranges ToSave named, read before the write).
func (m *Model) Write(ino Ino, off int64, data []byte, saved []Span) {
	x := m.file(ino)
	if x == nil {
		return
	}
	x.save(saved)
	end := off + int64(len(data))
	x.undoom(off, end)
	x.pending = append(x.pending, fileOp{off: off, data: append([]byte(nil), data...)})
	x.size = max(x.size, end)
}

// Truncate records a truncation to size, and the durable bytes it cut
// (the ranges ToSaveTruncate named).
func (m *Model) Truncate(ino Ino, size int64, saved []Span) {
	x := m.file(ino)
	if x == nil {
		return
	}
	x.save(saved)
	x.pending = append(x.pending, fileOp{truncate: true, size: size})
	x.size = size
}

// Fsync records a successful fsync of ino: a file's data and size are
// durable (except data a failed fsync lost), a directory's entries are.
func (m *Model) Fsync(ino Ino) {
	x := m.nodes[ino]
	if x == nil {
		return
	}
	if x.dir {
		for _, name := range x.names() {
			m.setDur(x, name, x.cur[name])
		}
		return
	}
	x.dSize = x.size
	var kept []extent
	for _, e := range x.overlay {
		if e.doomed && e.off < x.dSize {
			e.data = e.data[:min(int64(len(e.data)), x.dSize-e.off)]
			kept = append(kept, e)
		}
	}
	x.overlay = kept
	x.pending = nil
}

// FsyncFailed records an fsync of a file that failed with EIO. The
// model follows Linux after fsyncgate: the dirty data is dropped, so it
// never becomes durable (a later successful fsync does not save it) and
// never persists at a power loss, though reads keep returning it until
// then, from the page cache. Data written after the failure is dirty again
// and a later fsync makes it durable.
func (m *Model) FsyncFailed(ino Ino) {
	x := m.file(ino)
	if x == nil {
		return
	}
	for _, op := range x.pending {
		if op.truncate {
			continue
		}
		end := op.off + int64(len(op.data))
		var zeros []Span
		for _, g := range x.gaps(op.off, end) {
			zeros = append(zeros, Span{Off: g.Off, Data: make([]byte, g.End-g.Off)})
		}
		x.save(zeros)
		x.doom(op.off, end)
	}
	x.pending = nil
}

// Unsynced counts the files with changes no fsync made durable, and the
// bytes of their unsynced writes.
func (m *Model) Unsynced() (files int, bytes int64) {
	for _, x := range m.nodes {
		if x.dir || (len(x.pending) == 0 && x.size == x.dSize) {
			continue
		}
		files++
		for _, op := range x.pending {
			bytes += int64(len(op.data))
		}
	}
	return files, bytes
}

// TakeGarbage returns the staged inodes that no durable name refers to any
// more: the adapter removes stage/<ino> for each.
func (m *Model) TakeGarbage() []Ino {
	g := m.garbage
	m.garbage = nil
	return g
}

// PowerSpec says which unsynced writes persist at a power loss. The zero
// value drops every one of them.
type PowerSpec struct {
	// Torn persists the last persisting unsynced write of each file only
	// up to a block boundary inside it (chosen with Seed); a write inside
	// one block does not persist.
	Torn bool
	// BlockBytes is the torn write's granularity (default 4096).
	BlockBytes int64
	// Reorder persists an arbitrary subset of each file's unsynced
	// changes (chosen with Seed), applied in their order, instead of none.
	Reorder bool
	Seed    int64
}

// DefaultBlockBytes is the block size torn writes are cut at by default.
const DefaultBlockBytes = 4096

// ActionKind is one step of a power loss on the backing dir.
type ActionKind int

const (
	// Move renames From to To.
	Move ActionKind = iota
	// HardLink links From as To.
	HardLink
	// Remove removes the name From.
	Remove
	// RemoveAll removes From and everything below it.
	RemoveAll
	// WriteAt writes Data at Off of From.
	WriteAt
	// TruncateTo truncates From to Size.
	TruncateTo
)

// Loc is a path of the backing dir (Rel, slash-separated, "" for the root)
// or, when Stage is set, of the stage area (stage/<Stage>/Rel).
type Loc struct {
	Stage Ino
	Rel   string
}

func (l Loc) child(name string) Loc { return Loc{Stage: l.Stage, Rel: path.Join(l.Rel, name)} }

func (l Loc) String() string {
	if l.Stage != 0 {
		return path.Join(fmt.Sprintf("<stage>/%d", l.Stage), l.Rel)
	}
	return "/" + l.Rel
}

// Action is one step of the plan PowerLoss returns.
type Action struct {
	Kind     ActionKind
	From, To Loc
	Off      int64
	Data     []byte
	Size     int64
}

func (a Action) String() string {
	switch a.Kind {
	case Move:
		return fmt.Sprintf("move %s %s", a.From, a.To)
	case HardLink:
		return fmt.Sprintf("link %s %s", a.From, a.To)
	case Remove:
		return fmt.Sprintf("remove %s", a.From)
	case RemoveAll:
		return fmt.Sprintf("remove-all %s", a.From)
	case WriteAt:
		return fmt.Sprintf("write %s %d %q", a.From, a.Off, a.Data)
	default:
		return fmt.Sprintf("truncate %s %d", a.From, a.Size)
	}
}

// PowerLoss plans what a power loss does to the backing dir: every name
// and byte no fsync made durable goes, except what spec lets persist. The
// adapter applies the actions in order; afterwards the backing dir is all
// durable and the model starts afresh (NewModel). Names go first (entries
// that changed are moved to the stage area, durable entries put back from
// the root down, what is left in the stage removed), then the content of
// every surviving file, in path order so that a seed replays.
//
// A directory with two durable names (renamed, and both parents fsynced)
// comes back under one of them only.
func (m *Model) PowerLoss(spec PowerSpec) []Action {
	var plan []Action
	// Detach every current entry that differs from the durable one.
	for _, d := range m.sortedNodes() {
		if !d.dir {
			continue
		}
		for _, name := range d.names() {
			x := m.nodes[d.cur[name]]
			if x == nil || d.cur[name] == d.dur[name] {
				continue
			}
			from := m.loc(d).child(name)
			if x.staged {
				plan = append(plan, Action{Kind: Remove, From: from})
			} else {
				plan = append(plan, Action{Kind: Move, From: from, To: Loc{Stage: x.ino}})
				x.staged = true
			}
			m.removeLink(d, name, x)
		}
	}
	// Attach the durable entries, from the root down.
	visited := map[Ino]bool{m.root: true}
	var files []*mnode
	queue := []*mnode{m.nodes[m.root]}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		for _, name := range d.names() {
			x := m.nodes[d.dur[name]]
			if x == nil || (x.dir && d.cur[name] != x.ino && (visited[x.ino] || len(x.links) > 0)) {
				continue // a directory comes back under one name only
			}
			if d.cur[name] != x.ino {
				to := m.loc(d).child(name)
				if len(x.links) == 0 && x.staged {
					plan = append(plan, Action{Kind: Move, From: Loc{Stage: x.ino}, To: to})
					x.staged = false
				} else {
					plan = append(plan, Action{Kind: HardLink, From: m.loc(x), To: to})
				}
				m.addLink(d, name, x)
			}
			if visited[x.ino] {
				continue
			}
			visited[x.ino] = true
			if x.dir {
				queue = append(queue, x)
			} else {
				files = append(files, x)
			}
		}
	}
	// Remove what is left in the stage area.
	for _, x := range m.sortedNodes() {
		if !x.staged {
			continue
		}
		if len(x.links) > 0 {
			plan = append(plan, Action{Kind: Remove, From: Loc{Stage: x.ino}})
		} else {
			plan = append(plan, Action{Kind: RemoveAll, From: Loc{Stage: x.ino}})
		}
	}
	// Restore the durable content of every surviving file.
	byPath := make([]struct {
		loc Loc
		x   *mnode
	}, len(files))
	for i, x := range files {
		byPath[i].loc, byPath[i].x = m.loc(x), x
	}
	sort.Slice(byPath, func(i, j int) bool { return byPath[i].loc.Rel < byPath[j].loc.Rel })
	rng := rand.New(rand.NewSource(spec.Seed))
	for _, f := range byPath {
		plan = append(plan, f.x.restore(f.loc, spec, rng)...)
	}
	*m = *NewModel(m.root)
	return plan
}

// restore plans the durable content of x, plus what spec lets persist.
func (x *mnode) restore(at Loc, spec PowerSpec, rng *rand.Rand) []Action {
	if len(x.overlay) == 0 && len(x.pending) == 0 && x.size == x.dSize {
		return nil
	}
	var plan []Action
	for _, e := range x.overlay {
		plan = append(plan, Action{Kind: WriteAt, From: at, Off: e.off, Data: e.data})
	}
	plan = append(plan, Action{Kind: TruncateTo, From: at, Size: x.dSize})
	var persist []fileOp
	if spec.Reorder {
		for _, op := range x.pending {
			if rng.Intn(2) == 0 {
				persist = append(persist, op)
			}
		}
	} else if spec.Torn {
		persist = x.pending
	}
	if spec.Torn {
		persist = tear(persist, spec.BlockBytes, rng)
	}
	for _, op := range persist {
		if op.truncate {
			plan = append(plan, Action{Kind: TruncateTo, From: at, Size: op.size})
		} else {
			plan = append(plan, Action{Kind: WriteAt, From: at, Off: op.off, Data: op.data})
		}
	}
	return plan
}

// tear cuts the last write of ops at a block boundary inside it, chosen
// with rng; a write that spans no boundary is dropped.
func tear(ops []fileOp, block int64, rng *rand.Rand) []fileOp {
	if block <= 0 {
		block = DefaultBlockBytes
	}
	last := -1
	for i, op := range ops {
		if !op.truncate {
			last = i
		}
	}
	if last < 0 {
		return ops
	}
	out := append([]fileOp(nil), ops...)
	w := out[last]
	first := (w.off/block + 1) * block
	end := w.off + int64(len(w.data))
	if first >= end {
		return append(out[:last], out[last+1:]...)
	}
	cuts := (end - 1 - first) / block // boundaries after the first one inside the write
	cut := first + rng.Int63n(cuts+1)*block
	out[last] = fileOp{off: w.off, data: w.data[:cut-w.off]}
	return out
}

func (m *Model) entryNode(parent Ino, name string) *mnode {
	d := m.nodes[parent]
	if d == nil || !d.dir {
		return nil
	}
	return m.nodes[d.cur[name]]
}

func (m *Model) file(ino Ino) *mnode {
	x := m.nodes[ino]
	if x == nil || x.dir {
		return nil
	}
	return x
}

func (m *Model) addLink(d *mnode, name string, x *mnode) {
	d.cur[name] = x.ino
	x.links[link{d.ino, name}] = true
}

func (m *Model) removeLink(d *mnode, name string, x *mnode) {
	delete(d.cur, name)
	delete(x.links, link{d.ino, name})
}

// setDur makes x the durable entry of name in d (0: durably absent).
func (m *Model) setDur(d *mnode, name string, ino Ino) {
	old := m.nodes[d.dur[name]]
	if old != nil && old.ino == ino {
		return
	}
	if x := m.nodes[ino]; x != nil {
		x.durRefs++
		d.dur[name] = ino
	} else {
		delete(d.dur, name)
	}
	if old != nil {
		old.durRefs--
		m.collect(old)
	}
}

// collect forgets x once nothing names it, durably or currently; a staged
// x becomes garbage for the adapter to remove. A forgotten directory's
// durable entries are dropped with it.
func (m *Model) collect(x *mnode) {
	if x.durRefs > 0 || len(x.links) > 0 || m.nodes[x.ino] != x {
		return
	}
	delete(m.nodes, x.ino)
	if x.staged {
		m.garbage = append(m.garbage, x.ino)
	}
	for _, name := range x.names() {
		m.setDur(x, name, 0)
	}
}

// loc is where x is now: in the stage area if staged, else under one of its
// current names.
func (m *Model) loc(x *mnode) Loc {
	var parts []string
	for depth := 0; ; depth++ {
		if depth > 1<<12 {
			panic(fmt.Sprintf("faultfs: model invariant: the path of inode %d does not end at the root", x.ino))
		}
		if x.ino == m.root {
			return Loc{Rel: joinReversed(parts)}
		}
		if x.staged {
			return Loc{Stage: x.ino, Rel: joinReversed(parts)}
		}
		l, ok := firstLink(x)
		if !ok {
			panic(fmt.Sprintf("faultfs: model invariant: inode %d has no name and is not staged", x.ino))
		}
		parts = append(parts, l.name)
		x = m.nodes[l.parent]
	}
}

func firstLink(x *mnode) (link, bool) {
	var best link
	found := false
	for l := range x.links {
		if !found || l.parent < best.parent || (l.parent == best.parent && l.name < best.name) {
			best, found = l, true
		}
	}
	return best, found
}

func joinReversed(parts []string) string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[len(parts)-1-i] = p
	}
	return path.Join(out...)
}

func (m *Model) sortedNodes() []*mnode {
	out := make([]*mnode, 0, len(m.nodes))
	for _, x := range m.nodes {
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ino < out[j].ino })
	return out
}

// names lists every name a directory has seen, current or durable, sorted.
func (x *mnode) names() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]Ino{x.cur, x.dur} {
		for name := range m {
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// gaps lists the parts of [off, end) the overlay does not cover.
func (x *mnode) gaps(off, end int64) []Range {
	var out []Range
	for _, e := range x.overlay {
		if off >= end {
			break
		}
		if e.end() <= off {
			continue
		}
		if e.off >= end {
			break
		}
		if e.off > off {
			out = append(out, Range{off, e.off})
		}
		off = max(off, e.end())
	}
	if off < end {
		out = append(out, Range{off, end})
	}
	return out
}

// save adds durable bytes to the overlay; each span covers a gap.
func (x *mnode) save(spans []Span) {
	for _, s := range spans {
		if len(s.Data) == 0 {
			continue
		}
		x.overlay = append(x.overlay, extent{off: s.Off, data: append([]byte(nil), s.Data...)})
	}
	sort.Slice(x.overlay, func(i, j int) bool { return x.overlay[i].off < x.overlay[j].off })
}

// doom marks the overlay in [off, end) doomed; undoom clears the mark.
func (x *mnode) doom(off, end int64)   { x.markDoomed(off, end, true) }
func (x *mnode) undoom(off, end int64) { x.markDoomed(off, end, false) }

func (x *mnode) markDoomed(off, end int64, doomed bool) {
	var out []extent
	for _, e := range x.overlay {
		if e.end() <= off || e.off >= end || e.doomed == doomed {
			out = append(out, e)
			continue
		}
		a, b := max(e.off, off), min(e.end(), end)
		if e.off < a {
			out = append(out, extent{off: e.off, data: e.data[:a-e.off], doomed: e.doomed})
		}
		out = append(out, extent{off: a, data: e.data[a-e.off : b-e.off], doomed: doomed})
		if b < e.end() {
			out = append(out, extent{off: b, data: e.data[b-e.off:], doomed: e.doomed})
		}
	}
	x.overlay = out
}
