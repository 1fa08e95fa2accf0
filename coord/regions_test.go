package coord

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/torus"
)

func TestRegionsNotFoundBeforeFirstApply(t *testing.T) {
	c := connect(t, sharedEtcd.Endpoints(), nil)
	_, err := c.Regions(testCtx(t))
	wantCode(t, err, CodeRegionsNotFound)
}

func TestApplyRegionsIsCompareAndSetOnVersion(t *testing.T) {
	onEachEtcd(t, func(t *testing.T, eps []string) {
		ctx := testCtx(t)
		c := connect(t, eps, nil)
		register(t, c, RegisterConfig{Name: "zone-a", Role: "zone"})
		register(t, c, RegisterConfig{Name: "zone-b", Role: "zone"})

		// The first table must be version 1.
		err := c.ApplyRegions(ctx, table(t, 2, "zone-a"), ApplyOptions{})
		wantCode(t, err, CodeRegionsConflict)
		if ce := asType[*RegionsConflictError](t, err); ce.Expected != 1 || ce.Actual != 0 {
			t.Fatalf("conflict %+v, want expected 1 actual 0", ce)
		}

		v1 := table(t, 1, "zone-a", "zone-b")
		if err := c.ApplyRegions(ctx, v1, ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := c.Regions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(v1) {
			t.Fatalf("stored table differs from the applied one")
		}

		for _, tc := range []struct {
			version        uint64
			expect, actual uint64
		}{
			{1, 0, 1}, // re-applying the same version
			{3, 2, 1}, // skipping a version
		} {
			err := c.ApplyRegions(ctx, table(t, tc.version, "zone-b"), ApplyOptions{})
			wantCode(t, err, CodeRegionsConflict)
			if !errors.Is(err, ErrRegionsConflict) {
				t.Fatalf("%v does not match ErrRegionsConflict", err)
			}
			if ce := asType[*RegionsConflictError](t, err); ce.Expected != tc.expect || ce.Actual != tc.actual {
				t.Fatalf("apply v%d: conflict %+v, want expected %d actual %d", tc.version, ce, tc.expect, tc.actual)
			}
		}
		// Force does not skip the compare-and-set.
		err = c.ApplyRegions(ctx, table(t, 1, "zone-b"), ApplyOptions{Force: true})
		wantCode(t, err, CodeRegionsConflict)

		got, err = c.Regions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(v1) {
			t.Fatalf("a refused apply changed the stored table")
		}
	})
}

// Operators applying at once: in every round exactly one wins and every
// other gets a conflict naming the version the winner stored.
func TestConcurrentApplyOneWins(t *testing.T) {
	onEachEtcd(t, func(t *testing.T, eps []string) {
		ctx := testCtx(t)
		c := connect(t, eps, nil)
		others := []*Client{connect(t, eps, nil), connect(t, eps, nil)}
		names := []string{"zone-a", "zone-b", "zone-c", "zone-d"}
		for _, n := range names {
			register(t, c, RegisterConfig{Name: n, Role: "zone"})
		}
		if err := c.ApplyRegions(ctx, table(t, 1, names...), ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
		const rounds, operators = 5, 4
		for round := range rounds {
			version := uint64(round + 2)
			tables := make([]*cells.Table, operators)
			errs := make([]error, operators)
			var wg sync.WaitGroup
			for op := range operators {
				// Each operator proposes a different assignment.
				tables[op] = table(t, version, names[op], names[(op+1)%len(names)])
				wg.Go(func() {
					cl := c
					if op > 0 {
						cl = others[op%len(others)]
					}
					errs[op] = cl.ApplyRegions(ctx, tables[op], ApplyOptions{})
				})
			}
			wg.Wait()
			winner := -1
			for op, err := range errs {
				if err == nil {
					if winner >= 0 {
						t.Fatalf("round %d: operators %d and %d both won", round, winner, op)
					}
					winner = op
					continue
				}
				wantCode(t, err, CodeRegionsConflict)
				if ce := asType[*RegionsConflictError](t, err); ce.Expected != version-1 || ce.Actual != version {
					t.Fatalf("round %d: conflict %+v, want expected %d actual %d", round, ce, version-1, version)
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: nobody won: %v", round, errs)
			}
			got, err := c.Regions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tables[winner]) {
				t.Fatalf("round %d: stored table is not the winner's", round)
			}
		}
	})
}

func TestApplyRegionsRefusesUnknownNodeUnlessForced(t *testing.T) {
	onEachEtcd(t, func(t *testing.T, eps []string) {
		ctx := testCtx(t)
		c := connect(t, eps, nil)
		register(t, c, RegisterConfig{Name: "zone-a", Role: "zone"})

		err := c.ApplyRegions(ctx, table(t, 1, "zone-a", "ghost", "also-gone"), ApplyOptions{})
		wantCode(t, err, CodeRegionsUnknown)
		if !errors.Is(err, ErrRegionsUnknownNode) {
			t.Fatalf("%v does not match ErrRegionsUnknownNode", err)
		}
		un := asType[*UnknownNodesError](t, err)
		if len(un.Nodes) != 2 || un.Nodes[0] != "also-gone" || un.Nodes[1] != "ghost" {
			t.Fatalf("unknown nodes %v, want [also-gone ghost]", un.Nodes)
		}
		if _, err := c.Regions(ctx); !errors.Is(err, ErrRegionsNotFound) {
			t.Fatalf("a refused table was stored: %v", err)
		}

		forced := table(t, 1, "zone-a", "ghost")
		if err := c.ApplyRegions(ctx, forced, ApplyOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		got, err := c.Regions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(forced) {
			t.Fatal("forced table not stored")
		}
	})
}

// The membership check is part of the write's transaction: a node that
// leaves after the pre-check and before the write still gets the table
// refused.
func TestApplyRegionsMembershipCheckedInTransaction(t *testing.T) {
	onEachEtcd(t, func(t *testing.T, eps []string) {
		ctx := testCtx(t)
		c := connect(t, eps, nil)
		register(t, c, RegisterConfig{Name: "zone-a", Role: "zone"})
		b := register(t, c, RegisterConfig{Name: "zone-b", Role: "zone"})
		c.beforeApplyTxn = func() {
			if err := b.Close(); err != nil {
				t.Error(err)
			}
		}
		err := c.ApplyRegions(ctx, table(t, 1, "zone-a", "zone-b"), ApplyOptions{})
		wantCode(t, err, CodeRegionsUnknown)
		if un := asType[*UnknownNodesError](t, err); len(un.Nodes) != 1 || un.Nodes[0] != "zone-b" {
			t.Fatalf("unknown nodes %v, want [zone-b]", un.Nodes)
		}
		if _, err := c.Regions(ctx); !errors.Is(err, ErrRegionsNotFound) {
			t.Fatalf("table stored despite the failed compare: %v", err)
		}
	})
}

func TestApplyRegionsRefusesGridChangeUnlessForced(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, sharedEtcd.Endpoints(), nil)
	register(t, c, RegisterConfig{Name: "zone-a", Role: "zone"})
	if err := c.ApplyRegions(ctx, table(t, 1, "zone-a"), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	small, err := cells.NewGrid(cells.GridConfig{World: torus.Config{Width: 32_000, Height: 32_000}})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := cells.Uniform(small, 2, []string{"zone-a"})
	if err != nil {
		t.Fatal(err)
	}
	err = c.ApplyRegions(ctx, v2, ApplyOptions{})
	wantCode(t, err, CodeRegionsInvalid)
	if err := c.ApplyRegions(ctx, v2, ApplyOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
}

func TestApplyRegionsRefusesInvalidTable(t *testing.T) {
	c := connect(t, sharedEtcd.Endpoints(), nil)
	err := c.ApplyRegions(testCtx(t), &cells.Table{}, ApplyOptions{Force: true})
	wantCode(t, err, CodeRegionsInvalid)
	if !errors.Is(err, cells.ErrInvalidTable) {
		t.Fatalf("%v does not carry cells' reason", err)
	}
}

// A stored value that is not a table (written around coord) is reported,
// and only a forced apply replaces it.
func TestStoredGarbageNeedsForce(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, sharedEtcd.Endpoints(), nil)
	register(t, c, RegisterConfig{Name: "zone-a", Role: "zone"})
	if _, err := c.cli.Put(ctx, c.regionsKey(), "not a table"); err != nil {
		t.Fatal(err)
	}
	_, err := c.Regions(ctx)
	wantCode(t, err, CodeRegionsInvalid)
	err = c.ApplyRegions(ctx, table(t, 1, "zone-a"), ApplyOptions{})
	wantCode(t, err, CodeRegionsInvalid)
	if err := c.ApplyRegions(ctx, table(t, 7, "zone-a"), ApplyOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Regions(ctx)
	if err != nil || got.Version() != 7 {
		t.Fatalf("Regions() = %v, %v; want version 7", got, err)
	}
}

// Every version, in order, exactly once — also for a watcher that does not
// read until all writes are done, and one that starts half-way.
func TestWatchRegionsDeliversEveryVersionInOrder(t *testing.T) {
	onEachEtcd(t, func(t *testing.T, eps []string) {
		ctx := testCtx(t)
		c := connect(t, eps, nil)
		names := []string{"zone-a", "zone-b", "zone-c"}
		for _, n := range names {
			register(t, c, RegisterConfig{Name: n, Role: "zone"})
		}
		early, err := c.WatchRegions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const versions = 20
		applied := make([]*cells.Table, versions+1)
		var late <-chan RegionsUpdate
		for v := uint64(1); v <= versions; v++ {
			applied[v] = table(t, v, names[v%3], names[(v+1)%3])
			if err := c.ApplyRegions(ctx, applied[v], ApplyOptions{}); err != nil {
				t.Fatalf("apply v%d: %v", v, err)
			}
			if v == versions/2 {
				if late, err = c.WatchRegions(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		check := func(name string, ch <-chan RegionsUpdate, from uint64) {
			t.Helper()
			var lastRev int64
			for v := from; v <= versions; v++ {
				select {
				case u := <-ch:
					if u.Table.Version() != v {
						t.Fatalf("%s watcher: got version %d, want %d", name, u.Table.Version(), v)
					}
					if !u.Table.Equal(applied[v]) {
						t.Fatalf("%s watcher: version %d differs from the applied table", name, v)
					}
					if u.Revision <= lastRev {
						t.Fatalf("%s watcher: revision %d not after %d", name, u.Revision, lastRev)
					}
					lastRev = u.Revision
				case <-ctx.Done():
					t.Fatalf("%s watcher: version %d never delivered", name, v)
				}
			}
		}
		check("early", early, 1)
		check("late", late, versions/2)

		// Nothing more: one more apply gives exactly one more update.
		next := table(t, versions+1, names[0])
		if err := c.ApplyRegions(ctx, next, ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
		if u := <-early; u.Table.Version() != versions+1 {
			t.Fatalf("after the last apply: version %d, want %d", u.Table.Version(), versions+1)
		}
	})
}

// compactNow compacts c's etcd history up to its current revision, so a
// watch started from an older revision fails with ErrCompacted.
func compactNow(ctx context.Context, c *Client) error {
	resp, err := c.cli.Get(ctx, c.regionsKey(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	_, err = c.cli.Compact(ctx, resp.Header.Revision)
	return err
}

// A watcher whose next revision was compacted away (a slow watcher, or one
// restarted after an outage) cannot replay the lost versions; it catches up
// with the current table and goes on watching. Versions stay strictly
// increasing: nothing is repeated, nothing goes backwards.
func TestWatchRegionsAcrossCompaction(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, sharedEtcd.Endpoints(), nil)
	register(t, c, RegisterConfig{Name: "zone-a", Role: "zone"})
	if err := c.ApplyRegions(ctx, table(t, 1, "zone-a"), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	hookDone := make(chan struct{})
	c.beforeWatch = func() error {
		once.Do(func() {
			defer close(hookDone)
			// Between the watcher's snapshot and its watch: two more
			// versions, then the history that holds them is compacted.
			for v := uint64(2); v <= 3; v++ {
				if err := c.ApplyRegions(ctx, table(t, v, "zone-a"), ApplyOptions{}); err != nil {
					t.Errorf("apply v%d: %v", v, err)
				}
			}
			if err := compactNow(ctx, c); err != nil {
				t.Errorf("compact: %v", err)
			}
		})
		return nil
	}
	updates, err := c.WatchRegions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func() uint64 {
		t.Helper()
		select {
		case u, ok := <-updates:
			if !ok {
				t.Fatal("watch closed")
			}
			return u.Table.Version()
		case <-ctx.Done():
			t.Fatal("no region update")
		}
		return 0
	}
	if v := next(); v != 1 {
		t.Fatalf("first update: version %d, want the snapshot's 1", v)
	}
	<-hookDone
	if v := next(); v != 3 {
		t.Fatalf("after compaction: version %d, want the current 3 (2 was compacted away)", v)
	}
	// The re-established watch sees later versions.
	if err := c.ApplyRegions(ctx, table(t, 4, "zone-a"), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if v := next(); v != 4 {
		t.Fatalf("after re-watch: version %d, want 4", v)
	}
}

// A watch broken while etcd keeps its history (here: as if etcd lost its
// leader) resumes where it stopped: versions committed while it was down
// are all delivered, none skipped to the current one.
func TestWatchRegionsResumesWithoutSkipping(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, sharedEtcd.Endpoints(), nil)
	register(t, c, RegisterConfig{Name: "zone-a", Role: "zone"})
	if err := c.ApplyRegions(ctx, table(t, 1, "zone-a"), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	watches := 0 // only the watch goroutine touches it
	c.beforeWatch = func() error {
		watches++
		if watches > 1 {
			return nil
		}
		for v := uint64(2); v <= 3; v++ {
			if err := c.ApplyRegions(ctx, table(t, v, "zone-a"), ApplyOptions{}); err != nil {
				t.Errorf("apply v%d: %v", v, err)
			}
		}
		return rpctypes.ErrNoLeader
	}
	updates, err := c.WatchRegions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for want := uint64(1); want <= 3; want++ {
		select {
		case u, ok := <-updates:
			if !ok {
				t.Fatal("watch closed")
			}
			if u.Table.Version() != want {
				t.Fatalf("update version %d, want %d", u.Table.Version(), want)
			}
		case <-ctx.Done():
			t.Fatalf("version %d never delivered", want)
		}
	}
}
