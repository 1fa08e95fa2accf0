package faulty

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/shardwise/shardwise/clock"
)

// ErrCut is returned when dialing across a cut.
var ErrCut = errors.New("faulty: link cut")

// Rule is the set of faults on one directed pair (and stream).
type Rule struct {
	// DropRate is the probability that a message is silently not sent.
	DropRate float64
	// DuplicateRate is the probability that a message is sent twice.
	DuplicateRate float64
	// Delay holds each message this long (on the network's clock) before
	// sending it; order within a stream is kept.
	Delay time.Duration
}

type pair struct{ from, to string }

type ruleKey struct {
	pair
	stream string // "" for every stream
}

// Network is the fault-injecting network shared by the nodes of one test.
type Network struct {
	clock clock.Clock

	mu     sync.Mutex
	rnd    *rand.Rand
	names  map[string]string // listen address → node name
	cut    map[pair]bool
	conns  map[pair]map[net.Conn]struct{}
	rules  map[ruleKey]Rule
	counts map[string]int // "drop", "duplicate", "delay", "refused" — what was injected
}

// New returns a network without faults. c drives delays (nil: real clock).
func New(seed uint64, c clock.Clock) *Network {
	return &Network{
		clock:  clock.OrReal(c),
		rnd:    rand.New(rand.NewPCG(seed, 0xfa017)),
		names:  map[string]string{},
		cut:    map[pair]bool{},
		conns:  map[pair]map[net.Conn]struct{}{},
		rules:  map[ruleKey]Rule{},
		counts: map[string]int{},
	}
}

// Listen binds addr for node name and remembers the address as name's.
func (n *Network) Listen(name, addr string) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.names[lis.Addr().String()] = name
	n.mu.Unlock()
	return lis, nil
}

func (n *Network) nameOf(addr string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := n.names[addr]; ok {
		return name
	}
	return addr
}

// Dialer returns the dial function for node from.
func (n *Network) Dialer(from string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		p := pair{from, n.nameOf(addr)}
		n.mu.Lock()
		if n.cut[p] {
			n.counts["refused"]++
			n.mu.Unlock()
			return nil, ErrCut
		}
		n.mu.Unlock()
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.cut[p] { // cut while dialing
			c.Close()
			return nil, ErrCut
		}
		if n.conns[p] == nil {
			n.conns[p] = map[net.Conn]struct{}{}
		}
		tc := &trackedConn{Conn: c, net: n, p: p}
		n.conns[p][tc] = struct{}{}
		return tc, nil
	}
}

type trackedConn struct {
	net.Conn
	net  *Network
	p    pair
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.net.mu.Lock()
		delete(c.net.conns[c.p], c)
		c.net.mu.Unlock()
	})
	return c.Conn.Close()
}

// Cut closes every connection between a and b (both directions) and
// refuses new ones until Heal(a, b).
func (n *Network) Cut(a, b string) {
	n.mu.Lock()
	var doomed []net.Conn
	for _, p := range []pair{{a, b}, {b, a}} {
		n.cut[p] = true
		for c := range n.conns[p] {
			doomed = append(doomed, c)
		}
	}
	n.mu.Unlock()
	for _, c := range doomed {
		c.Close()
	}
}

// Heal lets a and b connect again.
func (n *Network) Heal(a, b string) {
	n.mu.Lock()
	delete(n.cut, pair{a, b})
	delete(n.cut, pair{b, a})
	n.mu.Unlock()
}

// Set puts rule on messages from → to on stream ("" for all streams),
// replacing the previous rule there. The zero Rule clears it.
func (n *Network) Set(from, to, stream string, r Rule) {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := ruleKey{pair{from, to}, strings.ToLower(stream)}
	if r == (Rule{}) {
		delete(n.rules, k)
		return
	}
	n.rules[k] = r
}

// Injected reports how many faults of a kind ("drop", "duplicate",
// "delay", "refused") were injected so far, so a test can check that its
// faults really happened.
func (n *Network) Injected(kind string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.counts[kind]
}

// StreamInterceptor returns the gRPC client interceptor for node from.
func (n *Network) StreamInterceptor(from string) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		target := cc.Target()
		if i := strings.LastIndex(target, "/"); i >= 0 {
			target = target[i+1:]
		}
		stream := strings.ToLower(method[strings.LastIndex(method, "/")+1:])
		return &faultyStream{ClientStream: s, net: n, p: pair{from, n.nameOf(target)}, stream: stream}, nil
	}
}

type faultyStream struct {
	grpc.ClientStream
	net    *Network
	p      pair
	stream string
}

// decide rolls the dice for one message under the network's lock.
func (n *Network) decide(p pair, stream string) (drop, dup bool, delay time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r, ok := n.rules[ruleKey{p, stream}]
	if !ok {
		r, ok = n.rules[ruleKey{p, ""}]
	}
	if !ok {
		return false, false, 0
	}
	if r.DropRate > 0 && n.rnd.Float64() < r.DropRate {
		n.counts["drop"]++
		return true, false, 0
	}
	if r.DuplicateRate > 0 && n.rnd.Float64() < r.DuplicateRate {
		n.counts["duplicate"]++
		dup = true
	}
	if r.Delay > 0 {
		n.counts["delay"]++
	}
	return false, dup, r.Delay
}

func (s *faultyStream) SendMsg(m any) error {
	drop, dup, delay := s.net.decide(s.p, s.stream)
	if drop {
		return nil
	}
	if delay > 0 {
		if err := clock.Sleep(s.Context(), s.net.clock, delay); err != nil {
			return err
		}
	}
	if err := s.ClientStream.SendMsg(m); err != nil {
		return err
	}
	if dup {
		return s.ClientStream.SendMsg(m)
	}
	return nil
}
