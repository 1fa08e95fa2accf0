package game

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/outbox"
)

// Summary is the tick statistics of a headless run.
type Summary struct {
	Ticks    int
	Players  int
	Entities int // at the end
	// Tick wall time, nearest-rank percentiles.
	P50, P99, Max time.Duration
	// Per tick averages of the outbox flush.
	BatchesPerTick  float64
	MessagesPerTick float64 // frames delivered
	BytesPerTick    float64 // bytes delivered (what every socket carries)
	EncodedPerTick  float64 // bytes encoded once per audience
	Spawned, Died   int
}

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of ds.
// It sorts ds in place.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(float64(len(ds))*p/100+0.999999) - 1
	return ds[min(max(rank, 0), len(ds)-1)]
}

// Summarise folds per-tick wall times and reports into a Summary.
func Summarise(players int, durs []time.Duration, reps []Report) Summary {
	s := Summary{Ticks: len(reps), Players: players}
	if len(reps) == 0 {
		return s
	}
	for _, r := range reps {
		s.BatchesPerTick += float64(r.Outbox.Batches)
		s.MessagesPerTick += float64(r.Outbox.FramesDelivered)
		s.BytesPerTick += float64(r.Outbox.BytesDelivered)
		s.EncodedPerTick += float64(r.Outbox.BytesEncoded)
		s.Spawned += r.Spawned
		s.Died += r.Died
	}
	n := float64(len(reps))
	s.BatchesPerTick /= n
	s.MessagesPerTick /= n
	s.BytesPerTick /= n
	s.EncodedPerTick /= n
	s.Entities = reps[len(reps)-1].Entities
	ds := slices.Clone(durs)
	s.P50, s.P99 = Percentile(ds, 50), Percentile(ds, 99)
	if len(ds) > 0 {
		s.Max = ds[len(ds)-1]
	}
	return s
}

// WriteTo prints the summary for a terminal.
func (s Summary) WriteTo(w io.Writer) (int64, error) {
	ratio := 0.0
	if s.EncodedPerTick > 0 {
		ratio = s.BytesPerTick / s.EncodedPerTick
	}
	n, err := fmt.Fprintf(w,
		"ticks %d  players %d  entities %d  (mobs spawned %d, died %d)\n"+
			"tick time  p50 %v  p99 %v  max %v\n"+
			"per tick   batches %.1f  messages %.1f  bytes delivered %.0f  bytes encoded %.0f  (encode-once saves %.1fx)\n",
		s.Ticks, s.Players, s.Entities, s.Spawned, s.Died,
		s.P50, s.P99, s.Max,
		s.BatchesPerTick, s.MessagesPerTick, s.BytesPerTick, s.EncodedPerTick, ratio)
	return int64(n), err
}

// discard is the headless sink: the batch is complete and counted by the
// outbox; nobody reads it.
var discard = outbox.SinkFunc(func(uint64, [][]byte) {})

// RunHeadless plays cfg for ticks ticks as fast as it can, every account
// attached to a sink that drops its batch, and times each tick on c (nil
// means the wall clock). It stops early, with ctx's error, when ctx ends.
func RunHeadless(ctx context.Context, cfg Config, ticks int, c clock.Clock) (Summary, error) {
	g, err := New(cfg)
	if err != nil {
		return Summary{}, err
	}
	c = clock.OrReal(c)
	players := g.cfg.Players
	for a := 1; a <= players; a++ {
		g.Attach(account.ID(a), discard)
	}
	durs := make([]time.Duration, 0, ticks)
	reps := make([]Report, 0, ticks)
	for range ticks {
		if err := ctx.Err(); err != nil {
			return Summarise(players, durs, reps), err
		}
		start := c.Now()
		rep := g.Step()
		durs = append(durs, c.Since(start))
		reps = append(reps, rep)
	}
	return Summarise(players, durs, reps), nil
}
