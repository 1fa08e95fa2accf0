package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// benchFailoverTTLs are the lease TTLs BenchmarkEconFailover runs with
// (scripts/bench-econ reports the same list). 1s is the shortest the
// benchmark's etcd grants (1.5 election timeouts of 500 ms, rounded up to
// a whole second); the default of "shardwise econ" is 10s.
var benchFailoverTTLs = []time.Duration{1 * time.Second, 2 * time.Second, 5 * time.Second}

// BenchmarkEconFailover measures, with real processes, how long the
// economy cluster takes to accept a movement again on a scope whose node
// was SIGKILLed. One op is one fresh cluster: three "shardwise econ"
// processes (this test binary run as the command, as the tests do) on an
// embedded etcd in this process and one SQLite file, with the lease TTL
// under test and the defaults otherwise. Four callers put a load on it
// through the Go client, and a prober records on a scope the victim owns
// (so the victim holds an open epoch with rows in it). Then, after a wait
// drawn uniformly from [0, TTL) so that the kill lands anywhere in the
// victim's renewal cycle, the victim is SIGKILLed, and the prober records
// one movement on that scope through the same client, retrying with its
// key (as callers do on ECON.OUTCOME_UNKNOWN and ECON.NOT_READY) until it
// is accepted. The victim rotates over the three names from op to op; the
// survivors are stopped gracefully at the end of the op, and the money
// audit must find the ledger sound.
//
// A watch on the membership in this process splits each failover in three:
//
//   - expiry: from the kill until etcd deletes the victim's member record
//     (its lease expired; the floor, set by the TTL: the victim renewed
//     every TTL/3, so its lease had between 2/3 and all of the TTL left);
//   - re-form: from there until every survivor publishes the same new view
//     (each settled its open sessions of the old view first): the moment
//     the nodes' barrier opens;
//   - accept: from there until the prober's movement is accepted (the
//     client learning the new members, its backoff between attempts, the
//     call itself).
//
// Each op logs a "failover:" line; the metrics are the medians (and the
// largest total) over the ops. ns/op is a whole op (start-up included) and
// means nothing here.
//
// scripts/bench-econ runs it and writes docs/bench/econ.md.
func BenchmarkEconFailover(b *testing.B) {
	eps := benchEtcd(b)
	for _, ttl := range benchFailoverTTLs {
		b.Run("ttl="+ttl.String(), func(b *testing.B) {
			var ops []failoverTimes
			names := []string{"econ-a", "econ-b", "econ-c"}
			for b.Loop() {
				op := len(ops)
				ft := benchFailoverOnce(b, eps, ttl, names, names[op%len(names)], op)
				b.Logf("failover: ttl=%s op=%d victim=%s scope=%s new-owner=%s expiry=%s reform=%s accept=%s total=%s calls=%d",
					ttl, op, ft.victim, ft.scope, ft.newOwner, msStr(ft.expiry), msStr(ft.reform), msStr(ft.accept), msStr(ft.total), ft.calls)
				ops = append(ops, ft)
			}
			med := func(f func(failoverTimes) time.Duration) float64 {
				var ds []time.Duration
				for _, o := range ops {
					ds = append(ds, f(o))
				}
				slices.Sort(ds)
				return float64(ds[(len(ds)-1)/2]) / float64(time.Millisecond)
			}
			b.ReportMetric(med(func(o failoverTimes) time.Duration { return o.total }), "failover-ms")
			b.ReportMetric(med(func(o failoverTimes) time.Duration { return o.expiry }), "expiry-ms")
			b.ReportMetric(med(func(o failoverTimes) time.Duration { return o.reform }), "reform-ms")
			b.ReportMetric(med(func(o failoverTimes) time.Duration { return o.accept }), "accept-ms")
			worst := slices.MaxFunc(ops, func(x, y failoverTimes) int { return int(x.total - y.total) })
			b.ReportMetric(float64(worst.total)/float64(time.Millisecond), "failover-max-ms")
			b.ReportMetric(med(func(o failoverTimes) time.Duration { return o.total })/float64(ttl/time.Millisecond), "failover/ttl")
		})
	}
}

// failoverTimes is one op's measurement.
type failoverTimes struct {
	victim, scope, newOwner       string
	expiry, reform, accept, total time.Duration
	calls                         int // client.Record calls the prober made
}

func msStr(d time.Duration) string {
	return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
}

// benchEtcd starts an embedded etcd for the benchmark (the election timing
// of etcdForCmdTest, so 1s leases are granted) and returns its endpoints.
func benchEtcd(b *testing.B) string {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{
		DataDir:       b.TempDir(),
		Heartbeat:     50 * time.Millisecond,
		Election:      500 * time.Millisecond,
		UnsafeNoFsync: true,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close() })
	return strings.Join(e.Endpoints(), ",")
}

// benchFailoverOnce runs one op (see BenchmarkEconFailover).
func benchFailoverOnce(b *testing.B, eps string, ttl time.Duration, names []string, victim string, op int) failoverTimes {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("/econ-failover/%s/%d/", ttl, op)
	path := filepath.Join(b.TempDir(), "econ.db")
	procs := map[string]*shardwiseProcess{}
	for _, name := range names {
		procs[name] = startEconProcess(b, "econ", "--endpoints", eps, "--prefix", prefix, "--name", name,
			"--store", "sqlite://"+path, "--ttl", ttl.String(), "--verbose")
	}
	cl, err := coord.Connect(ctx, coord.ClientConfig{Endpoints: strings.Split(eps, ","), Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	client, err := econ.NewClient(ctx, econ.ClientConfig{Members: cl, Insecure: true})
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	testenv.PollUntil(b, 30*time.Second, "three econ nodes ready with one view", func() bool {
		for name, p := range procs {
			if p.exited() {
				b.Fatalf("%s exited: %v\n%s", name, p.err, p.out.String())
			}
		}
		if len(client.View()) != len(names) {
			return false
		}
		for _, name := range names {
			hctx, hcancel := context.WithTimeout(ctx, time.Second)
			st, err := client.Health(hctx, name)
			hcancel()
			if err != nil || !st.Ready || len(st.View) != len(names) {
				return false
			}
		}
		return true
	})

	// The victim's scope: its (op/3)-th, so that the ops that kill the
	// same name probe different scopes, which move to either survivor.
	scope := ""
	for i, skip := 0, op/len(names); scope == ""; i++ {
		if s := fmt.Sprintf("market-%d", i); ownerOf(b, client, s) == victim {
			if skip == 0 {
				scope = s
			}
			skip--
		}
	}
	var survivors []string
	for _, n := range names {
		if n != victim {
			survivors = append(survivors, n)
		}
	}
	route, err := netting.ScopeRouter(survivors)
	if err != nil {
		b.Fatal(err)
	}
	ft := failoverTimes{victim: victim, scope: scope, newOwner: route(scope)}

	// The load: four callers over twelve scopes, every movement retried
	// with its key until its outcome is known.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var load sync.WaitGroup
	var loaded atomic.Int64
	for w := range 4 {
		load.Go(func() {
			for i := 0; loadCtx.Err() == nil; i++ {
				m := grantMovement(fmt.Sprintf("load-w%d-%d", w, i), fmt.Sprintf("user-%d", (i*7+w)%40), int64(1+(i+w)%5))
				if recordUntilKnown(loadCtx, client, fmt.Sprintf("market-%d", (i+3*w)%12), m) == nil {
					loaded.Add(1)
				}
			}
		})
	}
	defer func() {
		stopLoad()
		load.Wait()
	}()
	// The victim holds an open epoch with rows in it.
	for i := range 20 {
		if err := recordUntilKnown(ctx, client, scope, grantMovement(fmt.Sprintf("probe-pre-%d", i), "prober", 1)); err != nil {
			b.Fatalf("probe before the kill: %v", err)
		}
	}
	testenv.PollUntil(b, 30*time.Second, "the load under way", func() bool { return loaded.Load() >= 100 })

	// Watch the membership from just before the kill. The view every node
	// serves now is the victim's; the survivors re-formed once they all
	// publish another.
	hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
	st, err := client.Health(hctx, victim)
	hcancel()
	if err != nil {
		b.Fatal(err)
	}
	oldView := st.ViewID
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	events, err := cl.WatchMembers(wctx)
	if err != nil {
		b.Fatal(err)
	}
	type marks struct{ left, adopted time.Time }
	watched := make(chan marks, 1)
	synced := make(chan struct{}) // closed once the watch has delivered every member
	go func() {
		var mk marks
		defer func() { watched <- mk }()
		members := map[coord.NodeID]coord.Member{}
		inSync := false
		for ev := range events {
			now := time.Now()
			if ev.Kind == coord.MemberLeft {
				delete(members, ev.Member.ID)
			} else {
				members[ev.Member.ID] = ev.Member
			}
			if !inSync {
				if !adoptedOneView(members, names, "") {
					continue
				}
				close(synced)
				inSync = true
			}
			if _, ok := memberNamed(members, victim); !ok && mk.left.IsZero() {
				mk.left = now
			}
			if !mk.left.IsZero() && adoptedOneView(members, survivors, oldView) {
				mk.adopted = now
				return
			}
		}
	}()
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		b.Fatal("the membership watch did not deliver the three members within 10s")
	}

	// The victim renews its lease every TTL/3; an op's start-up takes
	// about the same time each op, so without this wait the kill would
	// land at the same moment of the renewal cycle every time.
	// A randomised delay, not a wait for anything; bounded by the op.
	delay := time.NewTimer(rand.N(ttl))
	select {
	case <-delay.C:
	case <-ctx.Done():
		delay.Stop()
		b.Fatal(ctx.Err())
	}

	key := fmt.Sprintf("probe-after-%d", op)
	t0 := time.Now()
	if err := procs[victim].cmd.Process.Kill(); err != nil {
		b.Fatal(err)
	}
	for {
		ft.calls++
		out, err := client.Record(ctx, scope, grantMovement(key, "prober", 1))
		if err == nil {
			if out.Status != netting.Accepted {
				b.Fatalf("probe after the kill: %+v", out)
			}
			break
		}
		if !errors.Is(err, econ.ErrOutcomeUnknown) && !errors.Is(err, econ.ErrNotReady) {
			b.Fatalf("probe after the kill (call %d): %v", ft.calls, err)
		}
	}
	accepted := time.Now()
	<-procs[victim].done
	var mk marks
	select {
	case mk = <-watched:
	case <-time.After(30 * time.Second):
		b.Fatalf("the watch saw no re-formed view of %v within 30s of the accept; now: %s", survivors, clusterState(ctx, cl, client, names))
	}
	if mk.adopted.IsZero() {
		b.Fatal("the membership watch ended before the survivors re-formed")
	}
	ft.expiry = mk.left.Sub(t0)
	ft.reform = mk.adopted.Sub(mk.left)
	ft.accept = accepted.Sub(mk.adopted)
	ft.total = accepted.Sub(t0)

	stopLoad()
	load.Wait()
	for _, n := range survivors {
		if err := procs[n].stop(30 * time.Second); err != nil {
			b.Fatalf("%s did not stop cleanly: %v\n%s", n, err, procs[n].out.String())
		}
	}
	store, err := sqlstore.OpenSQLite(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	rep, err := econ.Audit(ctx, store)
	if err != nil {
		b.Fatal(err)
	}
	if p := rep.Problems(false); len(p) > 0 {
		b.Fatalf("audit: %v", p)
	}
	return ft
}

// clusterState describes the econ members etcd lists and what each node
// says of itself, for a failure message.
func clusterState(ctx context.Context, cl *coord.Client, client *econ.Client, names []string) string {
	var parts []string
	ms, err := cl.Members(ctx)
	if err != nil {
		parts = append(parts, fmt.Sprintf("members: %v", err))
	}
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("member %s (incarnation %d) view %q", m.Name, m.Incarnation, m.Meta[econ.ViewMetaKey]))
	}
	for _, n := range names {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := client.Health(hctx, n)
		cancel()
		parts = append(parts, fmt.Sprintf("health %s: %+v %v", n, st, err))
	}
	return strings.Join(parts, "; ")
}

func ownerOf(b *testing.B, c *econ.Client, scope string) string {
	b.Helper()
	o, ok := c.OwnerOf(scope)
	if !ok {
		b.Fatal("the client knows no econ member")
	}
	return o
}

func memberNamed(members map[coord.NodeID]coord.Member, name string) (coord.Member, bool) {
	for _, m := range members {
		if m.Role == econ.Role && m.Name == name {
			return m, true
		}
	}
	return coord.Member{}, false
}

// adoptedOneView reports whether the econ members are exactly names and
// all publish one view id other than old ("": any): the barrier's
// condition.
func adoptedOneView(members map[coord.NodeID]coord.Member, names []string, old string) bool {
	view := ""
	n := 0
	for _, m := range members {
		if m.Role != econ.Role {
			continue
		}
		n++
		id := m.Meta[econ.ViewMetaKey]
		if !slices.Contains(names, m.Name) || id == "" || (old != "" && id == old) || (view != "" && id != view) {
			return false
		}
		view = id
	}
	return n == len(names)
}

func grantMovement(key, user string, amount int64) netting.Movement {
	return netting.Movement{Key: key, Legs: []ledger.Leg{
		ledger.Debit(ledger.Revenue, amount),
		ledger.Credit(ledger.Spendable(user), amount),
	}}
}

// recordUntilKnown records m, retrying with its key while the outcome is
// unknown or the owner is re-forming; nil once accepted.
func recordUntilKnown(ctx context.Context, c *econ.Client, scope string, m netting.Movement) error {
	for {
		out, err := c.Record(ctx, scope, m)
		switch {
		case err == nil && out.Status == netting.Accepted:
			return nil
		case err == nil:
			return fmt.Errorf("movement %s: %+v", m.Key, out)
		case ctx.Err() != nil:
			return err
		case errors.Is(err, econ.ErrOutcomeUnknown), errors.Is(err, econ.ErrNotReady):
			continue
		default:
			return err
		}
	}
}

// startEconProcess starts "shardwise args..." as a process, as
// startShardwise does for a test (which takes a *testing.T): killed at
// cleanup if it still runs, its output logged if the benchmark failed.
func startEconProcess(b *testing.B, args ...string) *shardwiseProcess {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	p := &shardwiseProcess{done: make(chan struct{})}
	p.cmd = exec.Command(exe, args...)
	p.cmd.Env = append(os.Environ(), asShardwise+"=1")
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	b.Cleanup(func() {
		if b.Failed() && !p.exited() {
			// A process still running when the benchmark failed may be
			// the reason: SIGQUIT makes it print every goroutine's stack.
			_ = p.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
			}
		}
		if !p.exited() {
			_ = p.stop(10 * time.Second)
		}
		if b.Failed() {
			b.Logf("shardwise %s:\n%s", strings.Join(args, " "), p.out.String())
		}
	})
	return p
}
