package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/internal/nodehttp"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// econCluster is the economy nodes of a demo, each an econ.Node serving the
// economy service on a loopback gRPC address, over one shared store, and a
// client of them routed through the same etcd. Both demos run one.
type econCluster struct {
	store *sqlstore.Store
	log   *slog.Logger
	names []string

	nodes   map[string]*demoNode
	client  *econ.Client
	clCoord *coord.Client
}

// demoNode is one economy node of the demo with its gRPC server and its
// metrics server.
type demoNode struct {
	node    *econ.Node
	coord   *coord.Client
	grpc    *grpc.Server
	done    chan struct{} // closed when Serve returned
	metrics *http.Server
	mdone   chan struct{} // closed when the metrics server returned
}

// econOptions are the nodes' timing.
type econOptions struct {
	EpochMaxAge, SweepBound time.Duration
	MaxMovements            int
	// TTL is the nodes' lease. Default 1s: the economy demo's quick
	// failover (a halted node revokes its lease; a live node under load
	// must keep renewing within it).
	TTL time.Duration
}

// startEcon starts the named nodes registered under prefix in the etcd at
// endpoints, and the client, and waits until every node is ready with the
// full view. On an error what it started is stopped.
func startEcon(ctx context.Context, endpoints []string, prefix string, store *sqlstore.Store, names []string, o econOptions, log *slog.Logger) (_ *econCluster, err error) {
	c := &econCluster{store: store, log: log, names: names, nodes: map[string]*demoNode{}}
	defer func() {
		if err != nil {
			_ = c.stop()
		}
	}()
	connect := func() (*coord.Client, error) {
		return coord.Connect(ctx, coord.ClientConfig{Endpoints: endpoints, Prefix: prefix})
	}
	for _, name := range names {
		cl, err := connect()
		if err != nil {
			return nil, err
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			cl.Close()
			return nil, err
		}
		ml, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			lis.Close()
			cl.Close()
			return nil, err
		}
		node, err := econ.Start(ctx, econ.Config{
			Name: name, Coord: cl, Store: store, Addr: lis.Addr().String(), MetricsAddr: ml.Addr().String(),
			TTL:          cmp.Or(o.TTL, time.Second),
			EpochMaxAge:  o.EpochMaxAge,
			MaxMovements: o.MaxMovements,
			SweepBound:   o.SweepBound,
			SweepEvery:   max(o.EpochMaxAge/4, 10*time.Millisecond),
			// A settle cut short (the kill) holds its claim this long; the
			// sweep can finish it afterwards.
			SettleLease: o.EpochMaxAge,
			Logger:      log,
		})
		if err != nil {
			ml.Close()
			lis.Close()
			cl.Close()
			return nil, err
		}
		gs := grpc.NewServer(econ.ServerOptions()...)
		econ.NewServer(node, econ.WithServerLogger(log)).Register(gs)
		reg := prometheus.NewRegistry()
		reg.MustRegister(node.Collectors()...)
		dn := &demoNode{node: node, coord: cl, grpc: gs, done: make(chan struct{}), mdone: make(chan struct{}),
			metrics: nodehttp.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), nodehttp.Timeouts{})}
		go func() {
			defer close(dn.done)
			_ = gs.Serve(lis)
		}()
		go func() {
			defer close(dn.mdone)
			_ = dn.metrics.Serve(ml)
		}()
		c.nodes[name] = dn
	}
	if c.clCoord, err = connect(); err != nil {
		return nil, err
	}
	if c.client, err = econ.NewClient(ctx, econ.ClientConfig{Members: c.clCoord, Insecure: true, Logger: log}); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx, names, 30*time.Second); err != nil {
		return nil, err
	}
	return c, nil
}

// waitReady polls until every named node is ready with exactly names.
func (c *econCluster) waitReady(ctx context.Context, names []string, limit time.Duration) error {
	want := slices.Sorted(slices.Values(names))
	deadline := time.Now().Add(limit)
	for {
		ready := true
		for _, n := range names {
			st := c.nodes[n].node.Status()
			if !st.Ready || !slices.Equal(st.View, want) {
				ready = false
			}
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: economy nodes not ready with view %v after %s", want, limit)
		}
		if err := clock.Sleep(ctx, clock.Real(), 10*time.Millisecond); err != nil {
			return err
		}
	}
}

// ready counts the nodes recording under their view.
func (c *econCluster) ready() int {
	n := 0
	for _, dn := range c.nodes {
		if dn.node.Status().Ready {
			n++
		}
	}
	return n
}

// closeExcept closes every node but the named one gracefully: their
// sessions settle.
func (c *econCluster) closeExcept(killed string) error {
	var err error
	for name, dn := range c.nodes {
		if name != killed {
			err = errors.Join(err, dn.node.Close())
		}
	}
	return err
}

// stop stops everything startEcon started: the nodes (the survivors
// gracefully, their sessions settled; Close of a halted node only releases
// it), their servers, the client and the coord clients. Safe on a partly
// started cluster.
func (c *econCluster) stop() error {
	var errs []error
	if c.client != nil {
		errs = append(errs, c.client.Close())
	}
	for _, dn := range c.nodes {
		errs = append(errs, dn.node.Close())
		dn.grpc.Stop()
		<-dn.done
		_ = dn.metrics.Close()
		<-dn.mdone
		errs = append(errs, dn.coord.Close())
	}
	if c.clCoord != nil {
		errs = append(errs, c.clCoord.Close())
	}
	return errors.Join(errs...)
}

// orphanWatch kills one economy node mid-epoch, as a crash would, and
// follows its orphans (its unsettled sessions with rows) until the
// survivors' sweep has settled them.
type orphanWatch struct {
	c     *econCluster
	out   io.Writer
	epoch time.Duration // the nodes' epoch age: how often to look

	mu         sync.Mutex
	killed     string
	orphans    map[string]time.Time // the killed node's unsettled sessions with rows → last row
	orphanDone map[string]bool      // ... that a sweep settled
	killedAt   time.Time
	lastSwept  time.Time
	youngest   time.Duration // smallest idle age of an orphan seen settled
}

func newOrphanWatch(c *econCluster, out io.Writer, epoch time.Duration) *orphanWatch {
	return &orphanWatch{c: c, out: out, epoch: epoch, orphans: map[string]time.Time{}, orphanDone: map[string]bool{}}
}

// kill halts the named node once it has an open epoch with journaled
// movements (polling briefly; at once if load ends first): its open epochs
// are left unsettled (orphans) and its service stops answering. The
// survivors re-form without it at once (econ's barrier), take its scopes,
// and their sweep settles the orphans once idle past the bound. The node
// counts as killed (counts().Killed) only once halted: an error before
// leaves it running, to be closed like the others.
func (w *orphanWatch) kill(ctx, load context.Context, name string) error {
	victim := w.c.nodes[name]
	for {
		open, err := w.victimSessions(ctx, name)
		if err != nil {
			return fmt.Errorf("not killed: looking for its open epochs: %w", err)
		}
		if len(open) > 0 || load.Err() != nil {
			break
		}
		if err := clock.Sleep(ctx, clock.Real(), 10*time.Millisecond); err != nil {
			return err
		}
	}
	victim.node.Halt()
	victim.grpc.Stop()
	w.mu.Lock()
	w.killed, w.killedAt = name, time.Now()
	w.mu.Unlock()
	// What it left: listed once it is fully stopped (a Record in flight as
	// it died may still have settled a rotated epoch).
	open, err := w.victimSessions(ctx, name)
	if err != nil {
		return fmt.Errorf("killed, but its orphans could not be listed: %w", err)
	}
	w.mu.Lock()
	for _, u := range open {
		w.orphans[u.ID] = u.LastRecordedAt
	}
	w.mu.Unlock()
	return nil
}

// victimSessions lists the named node's unsettled sessions that hold rows.
func (w *orphanWatch) victimSessions(ctx context.Context, name string) ([]netting.UnsettledSession, error) {
	list, err := w.c.store.ListUnsettled(ctx, 0)
	if err != nil {
		return nil, err
	}
	var open []netting.UnsettledSession
	for _, u := range list {
		if u.NodeID == name && u.Records > 0 {
			open = append(open, u)
		}
	}
	return open, nil
}

// check marks the orphans the store shows settled and prints them.
func (w *orphanWatch) check(ctx context.Context) (left int, err error) {
	w.mu.Lock()
	pending := len(w.orphans) - len(w.orphanDone)
	w.mu.Unlock()
	if pending == 0 {
		return 0, nil
	}
	list, err := w.c.store.ListUnsettled(ctx, 0)
	if err != nil {
		return 0, err
	}
	unsettled := map[string]bool{}
	for _, u := range list {
		unsettled[u.ID] = true
	}
	// The idle age of a settled orphan is read from the store, both ends
	// on its one clock: the settle's own SettledAt minus the last row's
	// time. (Reading the clock here, beside the list, would date a settle
	// that lands while the list runs — long, on a loaded machine — to
	// before it happened.)
	w.mu.Lock()
	var settled []string
	for id := range w.orphans {
		if !w.orphanDone[id] && !unsettled[id] {
			settled = append(settled, id)
		}
	}
	w.mu.Unlock()
	settledAt := make(map[string]time.Time, len(settled))
	for _, id := range settled {
		meta, err := w.c.store.Session(ctx, id)
		if err != nil {
			return 0, err
		}
		if !meta.Settled {
			return 0, fmt.Errorf("demo: orphan %s is not listed unsettled yet its session is not settled", id)
		}
		settledAt[id] = meta.SettledAt
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range settled {
		if w.orphanDone[id] {
			continue // a concurrent check counted it
		}
		last := w.orphans[id]
		w.orphanDone[id] = true
		w.lastSwept = time.Now()
		age := settledAt[id].Sub(last)
		if w.youngest == 0 || age < w.youngest {
			w.youngest = age
		}
		fmt.Fprintf(w.out, "swept %s (%s) after %s idle, %s after the kill\n", id, w.killed, age.Round(time.Millisecond), w.lastSwept.Sub(w.killedAt).Round(time.Millisecond))
	}
	return len(w.orphans) - len(w.orphanDone), nil
}

// wait polls until the sweep has settled every orphan, or limit.
func (w *orphanWatch) wait(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		left, err := w.check(ctx)
		if err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: %d orphans still unsettled after %s", left, limit)
		}
		if err := clock.Sleep(ctx, clock.Real(), w.epoch/4); err != nil {
			return err
		}
	}
}

// watch checks the orphans every eighth of an epoch until ctx ends, so
// that a settle is seen soon after it happens.
func (w *orphanWatch) watch(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(max(w.epoch/8, 5*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := w.check(ctx); err != nil && ctx.Err() == nil {
			log.Warn("demo: orphan check", "err", err)
		}
	}
}

// orphanCounts is what the watch found.
type orphanCounts struct {
	Killed              string
	Orphans, Settled    int
	SettledAfter        time.Duration // from the kill to the last seen settled
	YoungestSweptAge    time.Duration
	KilledAt, LastSwept time.Time
}

func (w *orphanWatch) counts() orphanCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := orphanCounts{Killed: w.killed, Orphans: len(w.orphans), Settled: len(w.orphanDone), YoungestSweptAge: w.youngest, KilledAt: w.killedAt, LastSwept: w.lastSwept}
	if !w.lastSwept.IsZero() {
		o.SettledAfter = w.lastSwept.Sub(w.killedAt)
	}
	return o
}

// startEtcd starts the demo's embedded etcd in dir: a throwaway cluster,
// living and dying with the run, so without fsync.
func startEtcd(ctx context.Context, dir string) (*coord.Embedded, error) {
	return coord.StartEmbedded(ctx, coord.EmbeddedConfig{
		DataDir: dir, Heartbeat: 50 * time.Millisecond, Election: 500 * time.Millisecond,
		UnsafeNoFsync: true,
	})
}
