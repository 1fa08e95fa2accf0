package demo

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// TestDemoShort runs the whole demo on SQLite with a short clock: epochs of
// 150 ms, the sweep bound at the law's minimum, a kill one second in. Every
// invariant the report checks must hold, the killed node must have left
// orphans, and the sweep must have settled all of them no earlier than the
// bound.
func TestDemoShort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "netting.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	testDemoShort(t, store)
}

// TestDemoShortPostgres is the same run on PostgreSQL.
func TestDemoShortPostgres(t *testing.T) {
	pg := testenv.StartPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store, err := sqlstore.Open(ctx, pg.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if store.Dialect() != "postgres" {
		t.Fatalf("--postgres opened %s", store.Dialect())
	}
	testDemoShort(t, store)
}

func testDemoShort(t *testing.T, store *sqlstore.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := EconomyConfig{
		Duration:     2500 * time.Millisecond,
		EpochMaxAge:  150 * time.Millisecond,
		KillAfter:    time.Second,
		MaxMovements: 64,
		Rate:         400,
		Workers:      6,
		Buyers:       40,
		Sellers:      8,
		Progress:     500 * time.Millisecond,
	}
	var out testenv.Buffer
	rep, err := RunEconomy(ctx, cfg, store, &out)
	if err != nil {
		t.Fatal(err)
	}
	rep.Print(&out)
	t.Log(out.String())
	if !rep.OK() {
		t.Fatalf("invariants failed: %v", rep.Failures)
	}
	if rep.Accepted == 0 {
		t.Fatal("no movement accepted")
	}
	if rep.Orphans == 0 {
		t.Fatal("the killed node left no orphans: the kill did not happen mid-epoch")
	}
	if rep.OrphansSettled != rep.Orphans {
		t.Fatalf("sweep settled %d of %d orphans", rep.OrphansSettled, rep.Orphans)
	}
	if bound := 2 * cfg.EpochMaxAge; rep.YoungestSweptAge <= bound {
		t.Errorf("an orphan was seen settled %s after its last row, not past the sweep bound %s", rep.YoungestSweptAge, bound)
	}
	if rep.NettingRatio <= 1 {
		t.Errorf("netting ratio %.2f: settles wrote as many postings as movements", rep.NettingRatio)
	}
	for _, want := range []string{"accepted=", "killed ", "swept ", "postings proved", "money conserved           yes"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestDemoConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		cfg   EconomyConfig
		field string
	}{
		{"one node", EconomyConfig{Nodes: []string{"a"}}, "--nodes"},
		{"empty node id", EconomyConfig{Nodes: []string{"a", "", "b"}}, "--nodes"},
		{"node twice", EconomyConfig{Nodes: []string{"a", "b", "a"}}, "--nodes"},
		{"sweep under the law", EconomyConfig{EpochMaxAge: time.Second, SweepBound: 1999 * time.Millisecond}, "SweepBound"},
		{"kill after the end", EconomyConfig{Duration: time.Second, KillAfter: time.Second}, "KillAfter"},
		{"unknown kill", EconomyConfig{Kill: "econ-9"}, "--kill"},
		{"no rate", EconomyConfig{Rate: -1}, "--rate"},
		{"no markets", EconomyConfig{Scopes: -1}, "--markets"},
		{"negative epoch", EconomyConfig{EpochMaxAge: -time.Second}, "--epoch"},
		{"negative duration", EconomyConfig{Duration: -time.Second}, "--duration"},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: %v, want a config error on %s", c.name, err, c.field)
		}
	}
	if err := (EconomyConfig{}).Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
	if err := (EconomyConfig{EpochMaxAge: time.Second, SweepBound: 2 * time.Second}).Validate(); err != nil {
		t.Errorf("sweep bound equal to the law's minimum refused: %v", err)
	}
}
