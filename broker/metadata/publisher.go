package metadata

import (
	"fmt"
	"sync"
)

// Publisher holds the newest Image and tells subscribers about every change.
// It implements Source. Subscribers are called on the publishing goroutine,
// in publish order, with the previous and the new image; they must not call
// Publish themselves.
type Publisher struct {
	mu      sync.Mutex // serializes Publish and Subscribe
	current imageBox
	subs    map[int]func(old, new *Image)
	order   []int
	nextSub int
	changed chan struct{}
}

type imageBox struct {
	mu sync.RWMutex
	im *Image
}

// NewPublisher returns a publisher holding initial.
func NewPublisher(initial *Image) *Publisher {
	p := &Publisher{subs: map[int]func(old, new *Image){}, changed: make(chan struct{})}
	p.current.im = initial
	return p
}

// Image returns the newest image.
func (p *Publisher) Image() *Image {
	p.current.mu.RLock()
	defer p.current.mu.RUnlock()
	return p.current.im
}

// Changed returns a channel closed at the next Publish.
func (p *Publisher) Changed() <-chan struct{} {
	p.current.mu.RLock()
	defer p.current.mu.RUnlock()
	return p.changed
}

// Publish makes next the current image and calls every subscriber.
func (p *Publisher) Publish(next *Image) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.publishLocked(next)
}

func (p *Publisher) publishLocked(next *Image) {
	p.current.mu.Lock()
	old := p.current.im
	p.current.im = next
	close(p.changed)
	p.changed = make(chan struct{})
	p.current.mu.Unlock()
	for _, id := range p.order {
		p.subs[id](old, next)
	}
}

// ApplyBatch applies a committed batch of records to the current image and
// publishes the result.
func (p *Publisher) ApplyBatch(lastOffset int64, recs []Record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	next, err := p.Image().ApplyBatch(lastOffset, recs)
	if err != nil {
		return fmt.Errorf("publish metadata up to offset %d: %w", lastOffset, err)
	}
	p.publishLocked(next)
	return nil
}

// Update publishes fn(current) atomically with respect to other publishes.
// An error from fn publishes nothing.
func (p *Publisher) Update(fn func(current *Image) (*Image, error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	next, err := fn(p.Image())
	if err != nil {
		return err
	}
	p.publishLocked(next)
	return nil
}

// Subscribe registers fn and calls it once at once with (nil, current) so
// the subscriber starts from the current image. The returned function
// unsubscribes.
func (p *Publisher) Subscribe(fn func(old, new *Image)) (cancel func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.nextSub
	p.nextSub++
	p.subs[id] = fn
	p.order = append(p.order, id)
	fn(nil, p.Image())
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.subs, id)
		for i, x := range p.order {
			if x == id {
				p.order = append(p.order[:i:i], p.order[i+1:]...)
				break
			}
		}
	}
}
