package directory

import (
	"context"
	"crypto/subtle"
	"sync"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/logintoken"
)

// Defaults shared by the implementations' configs.
const (
	DefaultLeaseTTL         = 30 * time.Second
	DefaultCounterRetention = 24 * time.Hour
)

// MemoryConfig configures Memory.
type MemoryConfig struct {
	// LeaseTTL is how long a session lives after Connect or Renew.
	// Default DefaultLeaseTTL (30 s).
	LeaseTTL time.Duration
	// CounterRetention is how long an account's epoch and route-version
	// counters are kept after its last write. Epochs stay monotonic without
	// them (the time floor); the route-version floor of an account idle for
	// longer is forgotten. Default DefaultCounterRetention (24 h); at least
	// LeaseTTL.
	CounterRetention time.Duration
	// Clock reads the time for leases, epochs and token claims.
	// Default clock.Real().
	Clock clock.Clock
}

func (c MemoryConfig) withDefaults() MemoryConfig {
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.CounterRetention == 0 {
		c.CounterRetention = DefaultCounterRetention
	}
	c.Clock = clock.OrReal(c.Clock)
	return c
}

// Validate reports the first invalid field, after defaults are filled in.
func (c MemoryConfig) Validate() error {
	c = c.withDefaults()
	if c.LeaseTTL < time.Millisecond {
		return errcode.Config("LeaseTTL", c.LeaseTTL, "must be at least 1ms")
	}
	if c.CounterRetention < c.LeaseTTL {
		return errcode.Config("CounterRetention", c.CounterRetention, "must be at least LeaseTTL")
	}
	return nil
}

// Memory is the in-process Directory for one machine. It keeps everything in
// maps under one mutex; leases, token claims and counters expire by the
// injected clock and are swept lazily (no goroutine), at most once per
// LeaseTTL, so nothing needs closing.
type Memory struct {
	cfg MemoryConfig

	mu        sync.Mutex
	sessions  map[account.ID]Session
	counters  map[account.ID]counters
	tokens    map[logintoken.ID]time.Time // id → forget after
	resumes   map[account.ID]resumeRecord
	nextSweep time.Time
}

// resumeRecord is an account's armed resume credential: its session
// epoch, the secret's hash, its window, and when it runs out (restarted
// by each Renew of its epoch).
type resumeRecord struct {
	epoch  Epoch
	hash   ResumeHash
	window time.Duration
	until  time.Time
}

// counters survive the session entry, like the Redis counters key.
type counters struct {
	epoch  Epoch
	route  uint64
	expiry time.Time
}

var _ Directory = (*Memory)(nil)
var _ logintoken.SingleUse = (*Memory)(nil)

// NewMemory validates cfg and returns an empty directory.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Memory{
		cfg:      cfg.withDefaults(),
		sessions: make(map[account.ID]Session),
		counters: make(map[account.ID]counters),
		tokens:   make(map[logintoken.ID]time.Time),
		resumes:  make(map[account.ID]resumeRecord),
	}, nil
}

// live returns the account's session if its lease has not run out. Callers
// hold mu.
func (m *Memory) live(account account.ID, now time.Time) (Session, bool) {
	s, ok := m.sessions[account]
	if !ok {
		return Session{}, false
	}
	if !now.Before(s.LeaseExpiry) {
		delete(m.sessions, account)
		return Session{}, false
	}
	return s, true
}

func (m *Memory) liveCounters(account account.ID, now time.Time) counters {
	c, ok := m.counters[account]
	if !ok || !now.Before(c.expiry) {
		return counters{}
	}
	return c
}

// sweep drops expired sessions, counters and token claims, at most once per
// LeaseTTL so the amortised cost per call stays constant. Callers hold mu.
func (m *Memory) sweep(now time.Time) {
	if now.Before(m.nextSweep) {
		return
	}
	m.nextSweep = now.Add(m.cfg.LeaseTTL)
	for a, s := range m.sessions {
		if !now.Before(s.LeaseExpiry) {
			delete(m.sessions, a)
		}
	}
	for a, c := range m.counters {
		if !now.Before(c.expiry) {
			delete(m.counters, a)
		}
	}
	for id, until := range m.tokens {
		if !now.Before(until) {
			delete(m.tokens, id)
		}
	}
	for a, r := range m.resumes {
		if !now.Before(r.until) {
			delete(m.resumes, a)
		}
	}
}

// Connect implements Directory.
func (m *Memory) Connect(ctx context.Context, account account.ID, gateway NodeID) (Session, Session, error) {
	if err := CheckAccount(account); err != nil {
		return Session{}, Session{}, err
	}
	if err := ctx.Err(); err != nil {
		return Session{}, Session{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	m.sweep(now)
	s, prev := m.connectLocked(account, gateway, now)
	return s, prev, nil
}

// connectLocked is Connect's step. Callers hold mu.
func (m *Memory) connectLocked(account account.ID, gateway NodeID, now time.Time) (Session, Session) {
	prev, hadPrev := m.live(account, now)
	c := m.liveCounters(account, now)
	c.epoch = NextEpoch(max(c.epoch, prev.Epoch), now)
	c.expiry = now.Add(m.cfg.CounterRetention)
	m.counters[account] = c
	s := Session{
		Account:     account,
		Epoch:       c.epoch,
		Gateway:     gateway,
		Master:      Route{Version: c.route},
		LeaseExpiry: now.Add(m.cfg.LeaseTTL),
	}
	if hadPrev {
		s.Master, s.HasMaster = prev.Master, prev.HasMaster
	}
	m.sessions[account] = s
	return s, prev
}

// current returns the live session if epoch is its epoch. Callers hold mu.
func (m *Memory) current(op string, account account.ID, epoch Epoch, now time.Time) (Session, error) {
	s, ok := m.live(account, now)
	if !ok {
		return Session{}, ErrNotFound.Wrap("%s of account %s with epoch %d", op, account, epoch)
	}
	if s.Epoch != epoch {
		return Session{}, &StaleEpochError{Op: op, Account: account, Epoch: epoch, Current: s.Epoch}
	}
	return s, nil
}

func checkWrite(ctx context.Context, account account.ID, epoch Epoch) error {
	if err := CheckAccount(account); err != nil {
		return err
	}
	if err := CheckEpoch(epoch); err != nil {
		return err
	}
	return ctx.Err()
}

// Renew implements Directory.
func (m *Memory) Renew(ctx context.Context, account account.ID, epoch Epoch) (Session, error) {
	if err := checkWrite(ctx, account, epoch); err != nil {
		return Session{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	s, err := m.current(OpRenew, account, epoch, now)
	if err != nil {
		return Session{}, err
	}
	s.LeaseExpiry = now.Add(m.cfg.LeaseTTL)
	m.sessions[account] = s
	// A session renewed for longer than CounterRetention would outlive its
	// counters; rebuild them from the session so the floors never drop.
	c := m.liveCounters(account, now)
	c.epoch = max(c.epoch, s.Epoch)
	c.route = max(c.route, s.Master.Version)
	c.expiry = now.Add(m.cfg.CounterRetention)
	m.counters[account] = c
	if r, ok := m.resumes[account]; ok && r.epoch == epoch {
		r.until = now.Add(r.window)
		m.resumes[account] = r
	}
	return s, nil
}

// SetMaster implements Directory.
func (m *Memory) SetMaster(ctx context.Context, account account.ID, epoch Epoch, route Route) (Session, error) {
	if err := checkWrite(ctx, account, epoch); err != nil {
		return Session{}, err
	}
	if err := CheckRoute(route); err != nil {
		return Session{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	s, err := m.current(OpSetMaster, account, epoch, now)
	if err != nil {
		return Session{}, err
	}
	if route.Version == s.Master.Version && s.HasMaster && route.Node == s.Master.Node {
		return s, nil // a retry of the write that already applied
	}
	if route.Version <= s.Master.Version {
		return Session{}, &StaleRouteError{Account: account, Route: route, Current: s.Master, HasMaster: s.HasMaster}
	}
	s.Master, s.HasMaster = route, true
	m.sessions[account] = s
	c := m.liveCounters(account, now)
	c.route = route.Version
	c.expiry = now.Add(m.cfg.CounterRetention)
	m.counters[account] = c
	return s, nil
}

// Lookup implements Directory.
func (m *Memory) Lookup(ctx context.Context, account account.ID) (Session, error) {
	if err := CheckAccount(account); err != nil {
		return Session{}, err
	}
	if err := ctx.Err(); err != nil {
		return Session{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.live(account, m.cfg.Clock.Now())
	if !ok {
		return Session{}, ErrNotFound.Wrap("account %s", account)
	}
	return s, nil
}

// Release implements Directory.
func (m *Memory) Release(ctx context.Context, account account.ID, epoch Epoch) error {
	if err := checkWrite(ctx, account, epoch); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.current(OpRelease, account, epoch, m.cfg.Clock.Now()); err != nil {
		return err
	}
	delete(m.sessions, account)
	return nil
}

// ClaimToken implements Directory and logintoken.SingleUse.
func (m *Memory) ClaimToken(ctx context.Context, id logintoken.ID, until time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	if !now.Before(until) {
		return ErrInvalidArgument.Wrap("token %s claimed until %v, which is not after now %v", id, until, now)
	}
	m.sweep(now)
	if prev, ok := m.tokens[id]; ok && now.Before(prev) {
		return ReplayedError(id)
	}
	m.tokens[id] = until
	return nil
}

// ArmResume implements Directory.
func (m *Memory) ArmResume(ctx context.Context, account account.ID, epoch Epoch, hash ResumeHash, window time.Duration) error {
	if err := checkWrite(ctx, account, epoch); err != nil {
		return err
	}
	if err := CheckWindow(window); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	if _, err := m.current(OpArmResume, account, epoch, now); err != nil {
		return err
	}
	m.resumes[account] = resumeRecord{epoch: epoch, hash: hash, window: window, until: now.Add(window)}
	return nil
}

// Resume implements Directory.
func (m *Memory) Resume(ctx context.Context, account account.ID, epoch Epoch, hash ResumeHash, gateway NodeID) (Session, Session, error) {
	if err := checkWrite(ctx, account, epoch); err != nil {
		return Session{}, Session{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	m.sweep(now)
	refuse := func(reason string) (Session, Session, error) {
		return Session{}, Session{}, &ResumeRefusedError{Account: account, Epoch: epoch, Reason: reason}
	}
	prev, _ := m.live(account, now)
	if max(m.liveCounters(account, now).epoch, prev.Epoch) > epoch {
		return refuse(ResumeSuperseded)
	}
	r, ok := m.resumes[account]
	switch {
	case !ok || r.epoch != epoch:
		return refuse(ResumeUnknown)
	case subtle.ConstantTimeCompare(r.hash[:], hash[:]) != 1:
		return refuse(ResumeMismatch)
	case !now.Before(r.until):
		return refuse(ResumeExpired)
	}
	delete(m.resumes, account)
	s, displaced := m.connectLocked(account, gateway, now)
	return s, displaced, nil
}

// RevokeResume implements Directory.
func (m *Memory) RevokeResume(ctx context.Context, account account.ID, epoch Epoch) error {
	if err := checkWrite(ctx, account, epoch); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.resumes[account]; ok && r.epoch == epoch {
		delete(m.resumes, account)
	}
	return nil
}

// ReplayedError is the error implementations return for a second claim of a
// token id; it matches logintoken.ErrReplayed.
func ReplayedError(id logintoken.ID) error {
	return logintoken.ErrReplayed.Wrap("token %s", id)
}

// Operation names, the "op" label of the metrics and StaleEpochError.Op.
const (
	OpConnect    = "connect"
	OpRenew      = "renew"
	OpSetMaster  = "set_master"
	OpLookup     = "lookup"
	OpRelease    = "release"
	OpClaimToken = "claim_token"
	OpArmResume  = "arm_resume"
	OpResume     = "resume"
	OpRevoke     = "revoke_resume"
)
