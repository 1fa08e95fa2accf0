package demo

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/dashboard"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/zone"
)

// TestWorldShort runs the whole-cluster demo briefly on SQLite: four zone
// nodes, three economy nodes, bots over WebSocket, a region move and an
// economy node killed, the dashboard served. Every invariant the report
// checks must hold, and the run must have done what it announces: the
// moments, handoffs, movements (loot, purchases or trades) and orphans
// swept; the dashboard, read when the region move is done, shows every
// node, the new table and entities.
func TestWorldShort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		out  testenv.Buffer
		mu   sync.Mutex
		dash string
		snap dashboard.Snapshot
		got  error
	)
	rep, err := RunWorld(ctx, WorldConfig{
		Duration: 15 * time.Second, Bots: 16, MoveAt: 4 * time.Second, KillAt: 7 * time.Second,
		EpochMaxAge: 500 * time.Millisecond, Progress: 2 * time.Second, DashboardAddr: "127.0.0.1:0",
		OnStart: func(st WorldStart) { mu.Lock(); dash = st.Dashboard; mu.Unlock() },
		OnEvent: func(line string) {
			if !strings.HasPrefix(line, "region move done") {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			got = getJSON(ctx, "http://"+dash+"/snapshot.json", &snap)
		},
	}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	rep.Print(&out)
	t.Log("\n" + out.String())
	if !rep.OK() {
		t.Fatalf("invariants failed: %v", rep.Failures)
	}
	if rep.RegionMove.Region < 0 || rep.Killed == "" || rep.Orphans == 0 {
		t.Errorf("the announced moments did not happen: move %+v, killed %q with %d orphans", rep.RegionMove, rep.Killed, rep.Orphans)
	}
	if rep.Handoffs.Acked == 0 || rep.Economy.Accepted == 0 || rep.Bots.Logins < 16 {
		t.Errorf("handoffs %d, movements %d, logins %d: the bots did not play", rep.Handoffs.Acked, rep.Economy.Accepted, rep.Bots.Logins)
	}
	mu.Lock()
	defer mu.Unlock()
	if got != nil {
		t.Fatalf("the dashboard's snapshot at the region move: %v", got)
	}
	if len(snap.Nodes) != 4 || snap.TableVersion != rep.RegionMove.Version || len(snap.Entities) == 0 {
		t.Errorf("the dashboard shows %d nodes, table v%d, %d entities: want 4, v%d, some", len(snap.Nodes), snap.TableVersion, len(snap.Entities), rep.RegionMove.Version)
	}
}

func getJSON(ctx context.Context, url string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// TestWorldZoneNodeFailingToStart: a zone node whose Host fails before it
// is ready ends the startup at once with its error (it used to wait out
// the 60 s start timeout and only warn).
func TestWorldZoneNodeFailingToStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var out testenv.Buffer
	host := func(ctx context.Context, hc zone.HostConfig) error {
		if hc.Name == "zone-2" {
			return errors.New("no such certificate")
		}
		return zone.Host(ctx, hc)
	}
	_, err := runWorld(ctx, WorldConfig{Duration: 10 * time.Second, Bots: 2, Progress: -1}, &out, host)
	if err == nil || !strings.Contains(err.Error(), "zone-2") || !strings.Contains(err.Error(), "no such certificate") {
		t.Fatalf("error %v: want zone-2's\n%s", err, out.String())
	}
	if ctx.Err() != nil {
		t.Fatalf("the startup waited out the test's deadline: %v", err)
	}
}

// TestWorldServeStoppedBeforeTheMoments: a --serve run stopped once a bot
// has logged in makes neither the move nor the kill, and fails nothing for
// it: the report says so.
func TestWorldServeStoppedBeforeTheMoments(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		out  testenv.Buffer
		once sync.Once
	)
	stop := make(chan struct{})
	rep, err := RunWorld(ctx, WorldConfig{
		Serve: true, Stop: stop, Duration: 20 * time.Second, Bots: 4, Progress: -1,
		Observe: func(r zone.HostReport) {
			if r.Sessions > 0 {
				once.Do(func() { close(stop) })
			}
		},
	}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	rep.Print(&out)
	t.Log("\n" + out.String())
	if !rep.OK() {
		t.Fatalf("invariants failed: %v", rep.Failures)
	}
	if rep.RegionMove.Region >= 0 || rep.RegionMove.NotMade == "" || rep.Killed != "" || rep.KillNotMade == "" {
		t.Errorf("move %+v, killed %q (%q): want neither made, each said so", rep.RegionMove, rep.Killed, rep.KillNotMade)
	}
	if !strings.Contains(out.String(), "bots until stopped") {
		t.Errorf("the header does not say the bots play until stopped")
	}
}
