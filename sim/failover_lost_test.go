package sim_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// Players of a node that died with nothing of them checkpointed, and
// logins that wait for a dead node's answer (issue 30): the player comes
// back from the world store once the node's lease has ended, and a login
// waits for a dead node no longer than its lease.

// noCheckpoints turns the checkpoint stream off: a node that dies takes
// its entities with it, as one does with what it took after its last
// checkpoint.
func noCheckpoints(c *zonetest.Config) {
	prev := c.Runtime
	c.Runtime = func(i int, rc *zone.Config) {
		prev(i, rc)
		rc.NoCheckpoint = true
	}
}

// The gateway lives (zone-0), the master's node (zone-1) dies and no
// checkpoint of the master reached its standby: once zone-1's lease has
// ended the gateway's node finds no node with the master and brings the
// player in again from the store; the client keeps its socket and gets
// its new master and pet (a new You), never two of them.
func TestAPlayerLostWithItsNodeComesBack(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rc := startResumeClusterWith(t, 3, 39, noCheckpoints)
	at := standInRegionOf(rc.rts[0], "zone-1")
	const a = account.ID(3901)
	rc.w.save(a, at)
	c := login(t, ctx, rc.urls[0], rc.w.token(a))
	master, pet := you(c)
	if on := rc.simulatedOn(master, -1); on != "zone-1" {
		t.Fatalf("the master is simulated on %q, want zone-1", on)
	}
	apply := rc.failNode(t, ctx, 1)
	rc.watch.waitSteps(t, 20)
	apply()
	var m2, p2 uint64
	if err := c.Wait(ctx, func(v *sim.View) bool {
		m2, p2 = v.You()
		return m2 != master && m2 != 0
	}); err != nil {
		t.Fatalf("the client never got its player back (still %d/%d): %v", master, pet, err)
	}
	if !zonetest.Poll(20*time.Second, func() bool {
		return rc.simulatedOn(m2, 1) != "" && rc.simulatedOn(p2, 1) != ""
	}) {
		t.Fatalf("the new master %d and pet %d are not simulated on a live node", m2, p2)
	}
	rc.watch.waitSteps(t, 20)
	rc.watch.check(t)
	live := []*zone.Runtime{rc.rts[0], rc.rts[2]}
	if n := simulatedOwned(live, func(o account.ID) bool { return o == a }); n != 2 {
		t.Fatalf("%d entities of the account simulated, want its master and pet", n)
	}
	select {
	case <-c.Done():
		code, reason, _ := c.Closed()
		t.Fatalf("the socket closed (%d %s)", code, reason)
	default:
	}
}

// The gateway and the master's node are one (zone-0), die together, and no
// checkpoint of the master reached its standby. The client resumes on
// zone-1 before the failover's table is written: the search finds no
// master once zone-0's lease has ended, and the player's position is in a
// region the table still gives zone-0. It is brought in there only once
// the failover's table names a live owner, not sent to the dead node.
func TestAPlayerLostWithItsGatewayComesBackInTheFailoversTable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rc := startResumeClusterWith(t, 3, 40, noCheckpoints)
	at := standInRegionOf(rc.rts[0], "zone-0")
	const a = account.ID(4001)
	rc.w.save(a, at)
	first := login(t, ctx, rc.urls[0], rc.w.token(a))
	if err := first.Wait(ctx, func(v *sim.View) bool { return v.Credential() != "" }); err != nil {
		t.Fatalf("no credential: %v", err)
	}
	cred := first.Credential()
	apply := rc.failNode(t, ctx, 0)
	<-first.Done()
	next, err := resumeOn(t, ctx, rc.urls[1], cred)
	if err != nil {
		t.Fatal(err)
	}
	rc.watch.waitSteps(t, 80) // longer than a takeover waits for answers
	apply()
	var master, pet uint64
	if err := next.Wait(ctx, func(v *sim.View) bool {
		master, pet = v.You()
		return master != 0
	}); err != nil {
		t.Fatalf("the resumed session never got its player: %v", err)
	}
	if !zonetest.Poll(20*time.Second, func() bool {
		return rc.simulatedOn(master, 0) != "" && rc.simulatedOn(pet, 0) != ""
	}) {
		t.Fatalf("the master %d and pet %d are not simulated on a live node", master, pet)
	}
	rc.watch.waitSteps(t, 20)
	rc.watch.check(t)
}

// gatedStore holds the saves of one account until released.
type gatedStore struct {
	worldstore.Store
	account account.ID
	mu      sync.Mutex
	gate    chan struct{} // nil: saves pass
}

func (s *gatedStore) hold() {
	s.mu.Lock()
	s.gate = make(chan struct{})
	s.mu.Unlock()
}

func (s *gatedStore) release() {
	s.mu.Lock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
	s.mu.Unlock()
}

func (s *gatedStore) SavePlayer(ctx context.Context, p worldstore.Player) error {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil && p.Account == s.account {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.SavePlayer(ctx, p)
}

// A login waits for a node that does not answer only while its lease
// lasts. The player logged out through zone-0's gateway; its master's
// node (zone-1) answers Saving while the save is on its way, then NotHere.
// zone-0 stops answering with its lease still held (a process that died),
// and a new login on zone-2 waits for it; once zone-0's lease ends the
// login brings the player in from the store at once, not a save's wait
// (12 s, 240 ticks) after zone-1's Saving.
func TestALoginWaitsForADeadNodeOnlyUntilItsLeaseEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const a = account.ID(4101)
	var (
		gs   *gatedStore
		once sync.Once
	)
	rc := startResumeClusterWith(t, 3, 41, func(c *zonetest.Config) {
		prev := c.Runtime
		c.Runtime = func(i int, rc *zone.Config) { // on each node's goroutine
			prev(i, rc)
			once.Do(func() { gs = &gatedStore{Store: rc.WorldStore, account: a} })
			rc.WorldStore = gs
		}
	})
	at := standInRegionOf(rc.rts[0], "zone-1")
	rc.w.save(a, at)
	first := login(t, ctx, rc.urls[0], rc.w.token(a))
	master, _ := you(first)
	if on := rc.simulatedOn(master, -1); on != "zone-1" {
		t.Fatalf("the master is simulated on %q, want zone-1", on)
	}
	gs.hold()
	defer gs.release()
	if err := first.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	removed := func() bool {
		ch := make(chan int, 1)
		rc.rts[1].Post(func() { ch <- rc.rts[1].PlayerStats().Removed })
		select {
		case n := <-ch:
			return n > 0
		case <-ctx.Done():
			return false
		}
	}
	if !zonetest.Poll(20*time.Second, removed) {
		t.Fatal("zone-1 never logged the player out")
	}
	// zone-0 goes silent, its lease held; halted from the goroutine that
	// steps the cluster (in zone-1's step).
	halted := make(chan struct{})
	rc.rts[1].Post(func() {
		rc.c.Halt("zone-0")
		close(halted)
	})
	<-halted
	next, err := sim.Dial(ctx, rc.urls[2])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = next.Close() })
	if _, err := next.Login(ctx, rc.w.token(a)); err != nil {
		t.Fatal(err)
	}
	rc.watch.waitSteps(t, 20) // zone-1 answers Saving
	gs.release()              // ... and NotHere once the save has landed
	rc.watch.waitSteps(t, 20)
	if m, _ := you(next); m != 0 {
		t.Fatalf("the login brought the player in (%d) while zone-0 could still have it", m)
	}
	if err := rc.c.Nodes[0].Ownership.Close(); err != nil {
		t.Fatal(err)
	}
	fenced := rc.watch.steps.Load()
	if err := next.Wait(ctx, func(v *sim.View) bool {
		m, _ := v.You()
		_, ok := v.Position(m)
		return m != 0 && ok
	}); err != nil {
		t.Fatalf("the login never brought the player in: %v", err)
	}
	// zone-0's lease ends within a few steps of the close (the etcd
	// watch), the login goes on at the next tick; a save's wait is 240.
	took := rc.watch.steps.Load() - fenced
	t.Logf("the login went on %d steps after zone-0's lease was closed", took)
	if took > 120 {
		t.Fatalf("the login took %d steps after zone-0's lease ended, want it at once", took)
	}
	rc.watch.check(t)
}
