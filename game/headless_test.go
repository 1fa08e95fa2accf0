package game_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/game"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	cases := []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 50, 3 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 99, 5 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 100, 10 * time.Millisecond},
	}
	for _, c := range cases {
		if got := game.Percentile(c.in, c.p); got != c.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.in, c.p, got, c.want)
		}
	}
}

func TestRunHeadless(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := game.RunHeadless(context.Background(), game.Config{Seed: 2, Players: 12}, 120, fc)
	if err != nil {
		t.Fatal(err)
	}
	if s.Ticks != 120 || s.Players != 12 || s.Entities < 24 {
		t.Fatalf("summary %+v", s)
	}
	if s.P99 != 0 {
		t.Fatalf("a clock that never moves timed a tick at %v", s.P99)
	}
	if s.BatchesPerTick < 1 || s.BytesPerTick < s.EncodedPerTick || s.EncodedPerTick <= 0 {
		t.Fatalf("output per tick %+v", s)
	}
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"p50", "p99", "entities", "bytes encoded"} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, buf.String())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := game.RunHeadless(ctx, game.Config{Seed: 2}, 10, nil); err != context.Canceled {
		t.Fatalf("cancelled run: %v", err)
	}
}
