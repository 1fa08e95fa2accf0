package router

import (
	"context"
)

// startProberLocked starts c's health prober when health is on. The prober
// lives as long as c is the member's connection. r.mu is held.
func (r *Router[C]) startProberLocked(c *conn[C]) {
	if r.opts.Health == nil {
		return
	}
	ctx, cancel := context.WithCancel(c.member.ctx)
	c.stopProbe = cancel
	r.spawn(c.member, func() { r.probeLoop(ctx, c) })
}

// probeLoop probes c every Interval (measured from the end of the previous
// probe, so probes never overlap) until ctx ends or the node is marked
// down. Its failure count belongs to this connection only: a node that
// leaves and comes back starts from zero.
func (r *Router[C]) probeLoop(ctx context.Context, c *conn[C]) {
	h := r.opts.Health
	timer := r.clock.NewTimer(h.Interval)
	defer timer.Stop()
	// running is the result channel of a probe that timed out and has not
	// returned yet; while it is set no new probe starts.
	var running chan error
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		}
		if running != nil {
			select {
			case <-running:
				running = nil
			default:
			}
		}
		var err error
		if running != nil {
			err = ErrProbeStillRunning
		} else {
			running, err = r.probeOnce(ctx, c)
		}
		if ctx.Err() != nil {
			// Stopped (mark-down, removal, Close) during the probe: its
			// result is about a connection the router no longer uses.
			return
		}
		if err == nil {
			failures = 0
		} else {
			failures++
			r.metrics.probeFailures.WithLabelValues(c.member.id).Inc()
			r.log.Debug("router: probe failed", "node", c.member.id, "failures", failures, "err", err)
			if failures >= h.FailureThreshold {
				r.markDownConn(c, ReasonProbe, err)
				return
			}
		}
		timer.Reset(h.Interval)
	}
}

// probeOnce runs one Check on its own goroutine and waits for it, for
// Timeout on the router's clock, or for ctx. When the probe times out its
// context is cancelled and its result channel is returned, so the caller
// does not start another until it has returned.
func (r *Router[C]) probeOnce(ctx context.Context, c *conn[C]) (running chan error, err error) {
	h := r.opts.Health
	var pctx context.Context
	var cancel context.CancelFunc
	if r.wallTime {
		// A real deadline lets drivers set socket timeouts from the ctx.
		pctx, cancel = context.WithTimeout(ctx, h.Timeout)
	} else {
		pctx, cancel = context.WithCancel(ctx)
	}
	res := make(chan error, 1)
	r.spawn(c.member, func() {
		defer cancel()
		res <- h.Check(pctx, c.client, c.node)
	})
	deadline := r.clock.NewTimer(h.Timeout)
	defer deadline.Stop()
	select {
	case err := <-res:
		return nil, err
	case <-deadline.C():
		cancel()
		return res, ErrProbeTimeout
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
}
