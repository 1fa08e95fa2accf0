package redisdir_test

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/logintoken"
)

// benchParallelism × GOMAXPROCS goroutines run the parallel benchmarks.
const benchParallelism = 8

// Token ids unique across every benchmark of the process and across runs
// against the same server.
var (
	benchStart = time.Now()
	tokenSeq   atomic.Int64
)

// BenchmarkDirectory measures each operation on the in-process directory
// and on Redis in the same run. Serial runs one caller (the latency of one
// round trip); Parallel runs 8×GOMAXPROCS callers on distinct
// accounts (throughput with many callers in flight).
func BenchmarkDirectory(b *testing.B) {
	srv := testenv.StartRedis(b)
	c := newClient(b, srv)
	impls := []struct {
		name string
		new  func(b *testing.B) directory.Directory
	}{
		{"memory", func(b *testing.B) directory.Directory {
			m, err := directory.NewMemory(directory.MemoryConfig{})
			if err != nil {
				b.Fatal(err)
			}
			return m
		}},
		{"redis", func(b *testing.B) directory.Directory { return newDir(b, c, time.Minute) }},
	}
	ops := []struct {
		name string
		run  func(ctx context.Context, d directory.Directory, account account.ID, s directory.Session, i int) error
	}{
		{"Connect", func(ctx context.Context, d directory.Directory, a account.ID, _ directory.Session, _ int) error {
			_, _, err := d.Connect(ctx, a, 1)
			return err
		}},
		{"Renew", func(ctx context.Context, d directory.Directory, a account.ID, s directory.Session, _ int) error {
			_, err := d.Renew(ctx, a, s.Epoch)
			return err
		}},
		{"SetMaster", func(ctx context.Context, d directory.Directory, a account.ID, s directory.Session, i int) error {
			_, err := d.SetMaster(ctx, a, s.Epoch, directory.Route{Node: 2, Version: uint64(i + 1)})
			return err
		}},
		{"Lookup", func(ctx context.Context, d directory.Directory, a account.ID, _ directory.Session, _ int) error {
			_, err := d.Lookup(ctx, a)
			return err
		}},
		{"ClaimToken", func(ctx context.Context, d directory.Directory, _ account.ID, _ directory.Session, i int) error {
			var id logintoken.ID
			binary.BigEndian.PutUint64(id[:8], uint64(benchStart.UnixNano()))
			binary.BigEndian.PutUint64(id[8:], uint64(tokenSeq.Add(1)))
			return d.ClaimToken(ctx, id, time.Now().Add(time.Minute))
		}},
	}
	ctx := context.Background()
	for _, impl := range impls {
		for _, op := range ops {
			b.Run(impl.name+"/"+op.name+"/serial", func(b *testing.B) {
				d := impl.new(b)
				s, _, err := d.Connect(ctx, 1, 1)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if err := op.run(ctx, d, 1, s, i); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
			b.Run(impl.name+"/"+op.name+"/parallel", func(b *testing.B) {
				d := impl.new(b)
				var seq atomic.Int64
				b.ReportAllocs()
				// Redis is bound by round trips, not CPU: many callers per
				// core, as many gateway goroutines would be.
				b.SetParallelism(benchParallelism)
				b.RunParallel(func(pb *testing.PB) {
					acct := account.ID(1<<32 + seq.Add(1))
					s, _, err := d.Connect(ctx, acct, 1)
					if err != nil {
						b.Error(err)
						return
					}
					i := 0
					for pb.Next() {
						if err := op.run(ctx, d, acct, s, i); err != nil {
							b.Error(err)
							return
						}
						i++
					}
				})
			})
		}
	}
}
