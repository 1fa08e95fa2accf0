package directory

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/logintoken"
)

// Results, the "result" label of the operations counter.
const (
	ResultOK          = "ok"
	ResultStaleEpoch  = "stale_epoch"
	ResultStaleRoute  = "stale_route"
	ResultNotFound    = "not_found"
	ResultReplayed    = "replayed"
	ResultRefused     = "resume_refused"
	ResultUnavailable = "unavailable"
	ResultInvalid     = "invalid"
	ResultCanceled    = "canceled"
	ResultError       = "error"
)

// Metrics are the directory's Prometheus collectors. The user registers
// them (Collectors) where they want, or nowhere; two directories in one
// registry need distinguishing labels (prometheus.WrapRegistererWith).
type Metrics struct {
	operations    *prometheus.CounterVec // op, result
	staleRefusals *prometheus.CounterVec // op
}

// NewMetrics returns a fresh, unregistered set of collectors.
func NewMetrics() *Metrics {
	const ns, sub = "shardwise", "directory"
	return &Metrics{
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "operations_total",
			Help: "Directory operations by op (connect, renew, set_master, lookup, release, claim_token, arm_resume, resume, revoke_resume) and result.",
		}, []string{"op", "result"}),
		staleRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "stale_refusals_total",
			Help: "Writes refused because they named a displaced session epoch or an old master route version, by op.",
		}, []string{"op"}),
	}
}

// Collectors returns the collectors for the caller to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.operations, m.staleRefusals}
}

// ResultOf classifies an error into a result label.
func ResultOf(err error) string {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, ErrStaleEpoch):
		return ResultStaleEpoch
	case errors.Is(err, ErrStaleRoute):
		return ResultStaleRoute
	case errors.Is(err, ErrNotFound):
		return ResultNotFound
	case errors.Is(err, logintoken.ErrReplayed):
		return ResultReplayed
	case errors.Is(err, ErrResumeRefused):
		return ResultRefused
	case errors.Is(err, ErrUnavailable):
		return ResultUnavailable
	case errors.Is(err, ErrInvalidArgument):
		return ResultInvalid
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ResultCanceled
	default:
		return ResultError
	}
}

// Instrumented wraps a Directory with metrics and logs. It adds no behaviour:
// every call goes to the wrapped directory unchanged.
type Instrumented struct {
	next    Directory
	metrics *Metrics
	log     *slog.Logger
}

var _ Directory = (*Instrumented)(nil)

// Instrument wraps d. A nil m counts nothing; a nil log discards.
func Instrument(d Directory, m *Metrics, log *slog.Logger) *Instrumented {
	if m == nil {
		m = NewMetrics()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Instrumented{next: d, metrics: m, log: log}
}

// observe counts one operation and logs refusals and errors. account is
// account.None for token claims, which name no account, and is then left
// out of the log line.
func (d *Instrumented) observe(ctx context.Context, op string, account account.ID, err error) {
	result := ResultOf(err)
	d.metrics.operations.WithLabelValues(op, result).Inc()
	attrs := func() []any {
		if !account.Valid() {
			return []any{"op", op, "err", err}
		}
		return []any{"op", op, "account", account, "err", err}
	}
	switch result {
	case ResultStaleEpoch, ResultStaleRoute:
		d.metrics.staleRefusals.WithLabelValues(op).Inc()
		d.log.DebugContext(ctx, "directory: stale write refused", attrs()...)
	case ResultReplayed:
		d.log.InfoContext(ctx, "directory: login token replayed", "err", err)
	case ResultRefused:
		d.log.InfoContext(ctx, "directory: resume refused", attrs()...)
	case ResultUnavailable, ResultError:
		d.log.WarnContext(ctx, "directory: store error", attrs()...)
	}
}

// Connect implements Directory.
func (d *Instrumented) Connect(ctx context.Context, account account.ID, gateway NodeID) (Session, Session, error) {
	s, prev, err := d.next.Connect(ctx, account, gateway)
	d.observe(ctx, OpConnect, account, err)
	if err == nil && prev.Epoch != 0 {
		d.log.DebugContext(ctx, "directory: session displaced", "account", account,
			"epoch", s.Epoch, "gateway", s.Gateway, "displaced_epoch", prev.Epoch, "displaced_gateway", prev.Gateway)
	}
	return s, prev, err
}

// Renew implements Directory.
func (d *Instrumented) Renew(ctx context.Context, account account.ID, epoch Epoch) (Session, error) {
	s, err := d.next.Renew(ctx, account, epoch)
	d.observe(ctx, OpRenew, account, err)
	return s, err
}

// SetMaster implements Directory.
func (d *Instrumented) SetMaster(ctx context.Context, account account.ID, epoch Epoch, route Route) (Session, error) {
	s, err := d.next.SetMaster(ctx, account, epoch, route)
	d.observe(ctx, OpSetMaster, account, err)
	return s, err
}

// Lookup implements Directory.
func (d *Instrumented) Lookup(ctx context.Context, account account.ID) (Session, error) {
	s, err := d.next.Lookup(ctx, account)
	d.observe(ctx, OpLookup, account, err)
	return s, err
}

// Release implements Directory.
func (d *Instrumented) Release(ctx context.Context, account account.ID, epoch Epoch) error {
	err := d.next.Release(ctx, account, epoch)
	d.observe(ctx, OpRelease, account, err)
	return err
}

// ClaimToken implements Directory.
func (d *Instrumented) ClaimToken(ctx context.Context, id logintoken.ID, until time.Time) error {
	err := d.next.ClaimToken(ctx, id, until)
	d.observe(ctx, OpClaimToken, account.None, err)
	return err
}

// ArmResume implements Directory.
func (d *Instrumented) ArmResume(ctx context.Context, account account.ID, epoch Epoch, hash ResumeHash, window time.Duration) error {
	err := d.next.ArmResume(ctx, account, epoch, hash, window)
	d.observe(ctx, OpArmResume, account, err)
	return err
}

// Resume implements Directory.
func (d *Instrumented) Resume(ctx context.Context, account account.ID, epoch Epoch, hash ResumeHash, gateway NodeID) (Session, Session, error) {
	s, prev, err := d.next.Resume(ctx, account, epoch, hash, gateway)
	d.observe(ctx, OpResume, account, err)
	return s, prev, err
}

// RevokeResume implements Directory.
func (d *Instrumented) RevokeResume(ctx context.Context, account account.ID, epoch Epoch) error {
	err := d.next.RevokeResume(ctx, account, epoch)
	d.observe(ctx, OpRevoke, account, err)
	return err
}

// Operations returns the operations counter (op, result), for tests and for
// callers that read it directly.
func (m *Metrics) Operations() *prometheus.CounterVec { return m.operations }
