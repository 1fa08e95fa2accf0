package coord

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shardwise/shardwise/cells"
)

// benchClient connects under a fresh prefix with four live members and a
// stored 256-region table at version 1.
func benchClient(b *testing.B) (*Client, []string) {
	b.Helper()
	ctx := context.Background()
	c, err := Connect(ctx, ClientConfig{Endpoints: sharedEtcd.Endpoints(), Prefix: fmt.Sprintf("/bench/%s/%d/", b.Name(), time.Now().UnixNano())})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	names := []string{"zone-a", "zone-b", "zone-c", "zone-d"}
	for _, n := range names {
		if _, err := c.Register(ctx, RegisterConfig{Name: n, Role: "zone", TTL: 60 * time.Second}); err != nil {
			b.Fatal(err)
		}
	}
	t, err := cells.Uniform(cells.DefaultGrid(), 1, names)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.ApplyRegions(ctx, t, ApplyOptions{}); err != nil {
		b.Fatal(err)
	}
	return c, names
}

// Baseline for the read: a bare etcd Get of the same key, no parsing.
func BenchmarkRegionsReadRawGet(b *testing.B) {
	c, _ := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.cli.Get(ctx, c.regionsKey()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRegionsRead(b *testing.B) {
	c, _ := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Regions(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// Baseline for the write: a bare etcd Put of the same bytes, no compare,
// no membership check.
func BenchmarkRegionsWriteRawPut(b *testing.B) {
	c, names := benchClient(b)
	ctx := context.Background()
	t, err := cells.Uniform(cells.DefaultGrid(), 2, names)
	if err != nil {
		b.Fatal(err)
	}
	val, err := t.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.cli.Put(ctx, c.regionsKey()+"-raw", string(val)); err != nil {
			b.Fatal(err)
		}
	}
}

// The full compare-and-set: read current, check members, transaction.
func BenchmarkRegionsApplyCAS(b *testing.B) {
	c, names := benchClient(b)
	ctx := context.Background()
	// Tables built ahead so the loop measures the apply only.
	const ahead = 4096
	tables := make([]*cells.Table, 0, ahead)
	for v := uint64(2); v < ahead+2; v++ {
		t, err := cells.Uniform(cells.DefaultGrid(), v, []string{names[v%4], names[(v+1)%4]})
		if err != nil {
			b.Fatal(err)
		}
		tables = append(tables, t)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == len(tables) {
			b.Fatalf("more than %d iterations; raise ahead", ahead)
		}
		if err := c.ApplyRegions(ctx, tables[i], ApplyOptions{}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// Register and Close: grant, claim id and name, revoke.
func BenchmarkRegisterClose(b *testing.B) {
	c, _ := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.Register(ctx, RegisterConfig{Name: "bench", Role: "zone", TTL: 60 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
