package link

import (
	"sync"

	"github.com/shardwise/shardwise/proto/linkpb"
)

// batchQueue is the per-peer replication queue: bounded, and when full the
// oldest batch is dropped. Replication is state, not events: a newer batch
// about an entity supersedes an older one, so under pressure the oldest is
// the least valuable thing to keep.
//
// Batches are numbered as they are queued, not as they are written, so a
// batch dropped here leaves a gap in the sequence the receiver sees (its
// only way to learn that something was lost).
type batchQueue struct {
	mu     sync.Mutex
	seq    uint64 // the last number given
	buf    []*linkpb.ReplicationBatch
	head   int
	n      int
	signal chan struct{} // one pending wake-up for the writer
}

func newBatchQueue(capacity int) *batchQueue {
	return &batchQueue{buf: make([]*linkpb.ReplicationBatch, capacity), signal: make(chan struct{}, 1)}
}

// push numbers b, adds it, and reports whether an older batch was dropped
// for it, and the depth after the push.
func (q *batchQueue) push(b *linkpb.ReplicationBatch) (dropped bool, depth int) {
	q.mu.Lock()
	q.seq++
	b.Seq = q.seq
	if q.n == len(q.buf) {
		q.buf[q.head] = nil
		q.head = (q.head + 1) % len(q.buf)
		q.n--
		dropped = true
	}
	q.buf[(q.head+q.n)%len(q.buf)] = b
	q.n++
	depth = q.n
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
	return dropped, depth
}

// pop takes the oldest batch.
func (q *batchQueue) pop() (b *linkpb.ReplicationBatch, depth int, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return nil, 0, false
	}
	b = q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return b, q.n, true
}

// clear empties the queue and returns how many batches it held.
func (q *batchQueue) clear() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.n
	for i := range q.buf {
		q.buf[i] = nil
	}
	q.head, q.n = 0, 0
	return n
}
