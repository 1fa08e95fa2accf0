package gateway_test

import (
	"context"
	"io"
	"testing"

	"github.com/coder/websocket"

	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/outbox"
)

// BenchmarkBatchWrite is the send path of one socket, a tick at a time:
// one op is one tick's batch of 30 component frames of a 12-byte payload
// (about 700 bytes, a view's tick in the gateway benchmark of sim) handed
// to Session.Deliver, written by the connection's writer, and read by a
// client on loopback that discards it, before the next op. So ns/op is a
// batch's way through both goroutines' wake-ups and the socket, not a
// throughput; allocations count both sides (the client reads through one
// reused reader and allocates little).
func BenchmarkBatchWrite(b *testing.B) {
	f := newFixture(b)
	n := f.node("gw-a", 1, func(c *gateway.Config) { c.Limits.SendBudget = 1 << 30 })
	c, _ := f.loggedIn(n, 3)
	s := n.world.session(3)
	frames := make([][]byte, 30)
	size := 0
	for i := range frames {
		frames[i] = outbox.AppendComponentFrame(nil, uint64(1000+i), 1, make([]byte, 12))
		size += len(frames[i])
	}
	read := make(chan int)
	go func() {
		batches := 0
		for {
			typ, r, err := c.ws.Reader(context.Background())
			if err != nil {
				close(read)
				return
			}
			nb, _ := io.Copy(io.Discard, r)
			if typ == websocket.MessageBinary && int(nb) > size {
				batches++
				read <- batches
			}
		}
	}()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	tick := uint64(0)
	for b.Loop() {
		tick++
		s.Deliver(tick, frames)
		if _, ok := <-read; !ok {
			b.Fatalf("the socket closed after %d batches", tick-1)
		}
	}
	b.StopTimer()
	_ = c.ws.CloseNow()
	for range read {
	}
}
