package demo

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/shardwise/shardwise/dashboard"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/game"
)

// worldDash is the demo's dashboard: a collector fed by every zone node's
// ticks, the economy nodes' stats once a second and the announced moments,
// served (dashboard.Listen) until the run ends.
type worldDash struct {
	col *dashboard.Collector
	srv *dashboard.Server

	mu   sync.Mutex
	play func(context.Context) (string, error) // set by serve

	ctx    context.Context
	stop   context.CancelFunc
	pushed chan struct{} // closed when the econ pusher returned; nil before serve
}

// errNotPlaying is /play's answer before the bots play.
var errNotPlaying = errors.New("the cluster is still starting")

// listenDashboard serves the dashboard (before the nodes start, so that
// their first ticks are seen; /play answers once serve gave it a way to
// log in). addr "" is no dashboard.
func listenDashboard(addr string, log *slog.Logger) (*worldDash, error) {
	if addr == "" {
		return nil, nil
	}
	w := &worldDash{col: dashboard.NewCollector(dashboard.CollectorConfig{Kinds: game.KindOf, Logger: log})}
	srv, err := dashboard.Listen("--dashboard", addr, w.col, dashboard.HandlerConfig{Play: w.playURL}, log)
	if err != nil {
		return nil, err
	}
	w.srv = srv
	w.ctx, w.stop = context.WithCancel(context.Background())
	return w, nil
}

// addr is where the page is served.
func (w *worldDash) addr() string { return w.srv.Addr() }

func (w *worldDash) playURL(ctx context.Context) (string, error) {
	w.mu.Lock()
	play := w.play
	w.mu.Unlock()
	if play == nil {
		return "", errNotPlaying
	}
	return play(ctx)
}

// serve gives the play view its logins (a new account into the gateways
// in turn) and starts the econ stats pusher; close stops it.
func (w *worldDash) serve(d *worldDemo, st WorldStart) {
	next := st.FirstFreeAccount
	w.mu.Lock()
	w.play = func(context.Context) (string, error) {
		d.mu.Lock()
		a := next
		next++
		d.mu.Unlock()
		tok, err := st.Token(a)
		if err != nil {
			return "", err
		}
		return dashboard.PlayURL(st.Gateways[d.cfg.Zones[int(a)%len(d.cfg.Zones)]], tok), nil
	}
	w.mu.Unlock()
	w.pushed = make(chan struct{})
	go func() {
		defer close(w.pushed)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		nodes := make([]*econ.Node, 0, len(d.ec.nodes))
		for _, n := range d.cfg.Econs {
			nodes = append(nodes, d.ec.nodes[n].node)
		}
		for {
			if err := w.col.EconNodes(w.ctx, d.ledger, nodes...); err != nil && w.ctx.Err() == nil {
				d.log.Warn("demo: dashboard economy stats", "err", err)
			}
			select {
			case <-w.ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// close stops the pusher and the server, and waits for them. Safe on a
// dashboard never served.
func (w *worldDash) close() error {
	w.stop()
	if w.pushed != nil {
		<-w.pushed
	}
	return w.srv.Close()
}
