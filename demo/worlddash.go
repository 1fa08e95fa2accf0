package demo

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/shardwise/shardwise/dashboard"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/game"
)

// worldDash is the demo's dashboard: a collector fed by every zone node's
// ticks, the economy nodes' stats once a second and the announced moments,
// served over HTTP until the run ends.
type worldDash struct {
	col    *dashboard.Collector
	lis    net.Listener
	srv    *http.Server
	served chan struct{} // closed when Serve returned
	stop   context.CancelFunc
	ctx    context.Context
	pushed chan struct{} // closed when the econ pusher returned
}

// listenDashboard opens the dashboard's listener and collector (before the
// nodes start, so that their first ticks are seen). addr "" is no dashboard.
func listenDashboard(addr string, log *slog.Logger) (*worldDash, error) {
	if addr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errcode.Config("--dashboard", addr, err.Error())
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &worldDash{
		col: dashboard.NewCollector(dashboard.CollectorConfig{Kinds: game.KindOf, Logger: log}),
		lis: lis, ctx: ctx, stop: cancel,
	}, nil
}

// addr is where the page is served.
func (w *worldDash) addr() string { return w.lis.Addr().String() }

// serve starts the server, with the play view logging a new account into
// the first gateway, and the econ stats pusher; close stops both.
func (w *worldDash) serve(d *worldDemo, st WorldStart) {
	next := st.FirstFreeAccount
	play := func(context.Context) (string, error) {
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
	w.srv = &http.Server{
		Handler:           dashboard.Handler(w.col, dashboard.HandlerConfig{Play: play, Context: w.ctx}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	w.served = make(chan struct{})
	go func() {
		defer close(w.served)
		if err := w.srv.Serve(w.lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Warn("demo: dashboard server", "err", err)
		}
	}()
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

// close stops the streams, the server and the pusher, and waits for them.
// Safe on a dashboard never served.
func (w *worldDash) close() error {
	w.stop()
	var err error
	if w.srv != nil {
		err = w.srv.Close()
		<-w.served
		<-w.pushed
	} else {
		err = w.lis.Close()
	}
	return err
}
