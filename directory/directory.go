package directory

import (
	"context"
	"fmt"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/logintoken"
)

// NodeID is a node's id, the same 0–255 space as coord.NodeID (leased in
// etcd). It is its own type so that the directory does not import etcd.
type NodeID uint8

// Epoch is a session epoch. Zero is never issued.
type Epoch uint64

// Route is where an account's master entity is simulated. Version orders the
// routes of one account: a gateway switches to a route only on a higher
// version, and a crash-restore of the master jumps it by 2 (the fencing rule
// of the planned handoff protocol), so a half-dead old owner can never win
// again.
type Route struct {
	Node    NodeID
	Version uint64
}

// Session is one account's directory entry.
type Session struct {
	Account account.ID
	Epoch   Epoch
	Gateway NodeID
	// Master is the current master route; meaningful only when HasMaster.
	// Without a master, Master.Version is the floor the next SetMaster must
	// exceed.
	Master    Route
	HasMaster bool
	// LeaseExpiry is when the entry disappears unless renewed, by the
	// store's clock (Redis's clock for redisdir).
	LeaseExpiry time.Time
}

// Directory is the session directory port. Implementations are safe for
// concurrent use; every method can block on the store and honours ctx.
type Directory interface {
	// Connect records a new connection of account at gateway with a new,
	// higher epoch and a fresh lease. A live previous session is displaced
	// (returned, so the caller can tell its gateway); its master route is
	// kept. displaced.Epoch is 0 when there was none.
	Connect(ctx context.Context, account account.ID, gateway NodeID) (s Session, displaced Session, err error)
	// Renew extends the lease of the session with this epoch.
	Renew(ctx context.Context, account account.ID, epoch Epoch) (Session, error)
	// SetMaster records the node that simulates the account's master.
	// route.Version must be at least 1 and above the current version;
	// repeating the current route is accepted and changes nothing.
	// Otherwise ErrStaleRoute.
	SetMaster(ctx context.Context, account account.ID, epoch Epoch, route Route) (Session, error)
	// Lookup returns the live session of account, or ErrNotFound.
	Lookup(ctx context.Context, account account.ID) (Session, error)
	// Release ends the session with this epoch (a clean logout).
	Release(ctx context.Context, account account.ID, epoch Epoch) error
	// ClaimToken is the single-use check of login tokens
	// (logintoken.SingleUse): nil for the first claim of id, an error
	// matching logintoken.ErrReplayed afterwards, until at least `until`,
	// which must be in the future.
	ClaimToken(ctx context.Context, id logintoken.ID, until time.Time) error

	// ArmResume records hash as the resume credential of the session with
	// this epoch, replacing the account's earlier one: valid for window
	// after the session was last known alive (this call, then every Renew
	// of the epoch, restarts the window). ErrNotFound or ErrStaleEpoch as
	// Renew; ErrInvalidArgument for a window under a millisecond or not
	// whole milliseconds.
	ArmResume(ctx context.Context, account account.ID, epoch Epoch, hash ResumeHash, window time.Duration) error
	// Resume consumes the resume credential of the account's session of
	// this epoch and, in the same atomic step, records a new connection at
	// gateway exactly as Connect does (a new, higher epoch; the session
	// of epoch, if its lease still runs, displaced and returned). It
	// succeeds only if epoch is still the account's newest (no login or
	// resume came after it), the credential armed for it is there and
	// unexpired, and hash is its hash; otherwise nothing changes and the
	// error matches ErrResumeRefused (*ResumeRefusedError says why). So a
	// credential works at most once, cluster-wide.
	Resume(ctx context.Context, account account.ID, epoch Epoch, hash ResumeHash, gateway NodeID) (s Session, displaced Session, err error)
	// RevokeResume forgets the resume credential of the session with this
	// epoch (a logout). Nil also when there is none or it is another
	// epoch's.
	RevokeResume(ctx context.Context, account account.ID, epoch Epoch) error
}

// ResumeHash is the SHA-256 of a resume credential's secret: the
// directory keeps the hash, never the secret, so that reading the store
// gives no credential.
type ResumeHash [32]byte

// Why a resume was refused (ResumeRefusedError.Reason).
const (
	// ResumeSuperseded: a newer session of the account exists (a login, or
	// the credential's first use).
	ResumeSuperseded = "superseded"
	// ResumeUnknown: no credential is armed for that epoch (never armed,
	// revoked by a logout, or forgotten after its window).
	ResumeUnknown = "unknown"
	// ResumeMismatch: the secret is not the armed credential's.
	ResumeMismatch = "mismatch"
	// ResumeExpired: the window has passed since the session was last
	// known alive.
	ResumeExpired = "expired"
)

// ResumeRefusedError is Resume's refusal. errors.Is(err,
// ErrResumeRefused) holds.
type ResumeRefusedError struct {
	Account account.ID
	Epoch   Epoch  // the credential's
	Reason  string // ResumeSuperseded, ResumeUnknown, ResumeMismatch or ResumeExpired
}

func (e *ResumeRefusedError) Error() string {
	return fmt.Sprintf("directory: resume of account %s session %d refused: %s", e.Account, e.Epoch, e.Reason)
}

// ErrorCode returns CodeResumeRefused.
func (e *ResumeRefusedError) ErrorCode() string { return CodeResumeRefused }

// Is makes errors.Is(err, ErrResumeRefused) true.
func (e *ResumeRefusedError) Is(target error) bool { return target == ErrResumeRefused }

// CheckWindow returns ErrInvalidArgument for a resume window under a
// millisecond or not whole milliseconds (what every store keeps exactly).
func CheckWindow(window time.Duration) error {
	if window < time.Millisecond || window%time.Millisecond != 0 {
		return ErrInvalidArgument.Wrap("resume window %v: want whole milliseconds, at least 1ms", window)
	}
	return nil
}

// Stable error codes of this package.
const (
	CodeStaleEpoch      = "DIRECTORY.STALE_EPOCH"
	CodeStaleRoute      = "DIRECTORY.STALE_ROUTE"
	CodeNotFound        = "DIRECTORY.NOT_FOUND"
	CodeUnavailable     = "DIRECTORY.UNAVAILABLE"
	CodeInvalidArgument = "DIRECTORY.INVALID_ARGUMENT"
	CodeResumeRefused   = "DIRECTORY.RESUME_REFUSED"
)

var (
	// ErrStaleEpoch: the write named an epoch that is not the session's
	// current one (it was displaced). Typed detail: *StaleEpochError.
	ErrStaleEpoch = errcode.New(CodeStaleEpoch, "directory: stale session epoch")
	// ErrStaleRoute: SetMaster named a route version that is not above the
	// current one. Typed detail: *StaleRouteError.
	ErrStaleRoute = errcode.New(CodeStaleRoute, "directory: stale master route version")
	// ErrNotFound: no live session for the account (never connected,
	// released, or its lease ran out).
	ErrNotFound = errcode.New(CodeNotFound, "directory: no live session")
	// ErrUnavailable: the store could not be reached or answered with an
	// error; nothing is known about whether a write applied.
	ErrUnavailable = errcode.New(CodeUnavailable, "directory: store unavailable")
	// ErrInvalidArgument: account.None, epoch 0, route version 0, or a
	// token claim that ends in the past.
	ErrInvalidArgument = errcode.New(CodeInvalidArgument, "directory: invalid argument")
	// ErrResumeRefused: Resume's credential does not (or no longer)
	// allow the resume. Typed detail: *ResumeRefusedError.
	ErrResumeRefused = errcode.New(CodeResumeRefused, "directory: resume refused")
)

// MaxRouteVersion bounds route versions so that every store keeps them
// exactly (Redis scripts compare them as Lua numbers, exact below 2^53).
const MaxRouteVersion = 1<<53 - 1

// StaleEpochError is returned (wrapped or not) when a write's epoch is not
// the current one. errors.Is(err, ErrStaleEpoch) holds.
type StaleEpochError struct {
	Op      string // "renew", "set_master" or "release"
	Account account.ID
	Epoch   Epoch // the caller's
	Current Epoch // the entry's
}

func (e *StaleEpochError) Error() string {
	return fmt.Sprintf("directory: %s of account %s with epoch %d refused: current epoch is %d", e.Op, e.Account, e.Epoch, e.Current)
}

// ErrorCode returns CodeStaleEpoch.
func (e *StaleEpochError) ErrorCode() string { return CodeStaleEpoch }

// Is makes errors.Is(err, ErrStaleEpoch) true.
func (e *StaleEpochError) Is(target error) bool { return target == ErrStaleEpoch }

// StaleRouteError is returned when SetMaster's route version is not above
// the current one. errors.Is(err, ErrStaleRoute) holds.
type StaleRouteError struct {
	Account   account.ID
	Route     Route // the caller's
	Current   Route // the entry's (Node meaningless unless HasMaster)
	HasMaster bool
}

func (e *StaleRouteError) Error() string {
	return fmt.Sprintf("directory: master route of account %s to node %d at version %d refused: current version is %d",
		e.Account, e.Route.Node, e.Route.Version, e.Current.Version)
}

// ErrorCode returns CodeStaleRoute.
func (e *StaleRouteError) ErrorCode() string { return CodeStaleRoute }

// Is makes errors.Is(err, ErrStaleRoute) true.
func (e *StaleRouteError) Is(target error) bool { return target == ErrStaleRoute }

// UnavailableError reports that the store failed during Op: it could not be
// reached or answered with an error, so whether a write applied is unknown.
// errors.Is(err, ErrUnavailable) holds, and so does errors.Is on the cause.
type UnavailableError struct {
	Op  string
	Err error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("directory: %s: store unavailable: %v", e.Op, e.Err)
}

// ErrorCode returns CodeUnavailable.
func (e *UnavailableError) ErrorCode() string { return CodeUnavailable }

// Unwrap returns ErrUnavailable and the cause.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// CheckAccount returns ErrInvalidArgument for account.None, which is no
// account. Implementations call it first.
func CheckAccount(account account.ID) error {
	if !account.Valid() {
		return ErrInvalidArgument.Wrap("account 0 is account.None, no account")
	}
	return nil
}

// CheckEpoch returns ErrInvalidArgument for epoch 0.
func CheckEpoch(epoch Epoch) error {
	if epoch == 0 {
		return ErrInvalidArgument.Wrap("epoch 0 is never issued")
	}
	return nil
}

// CheckRoute returns ErrInvalidArgument for route version 0.
func CheckRoute(r Route) error {
	if r.Version == 0 || r.Version > MaxRouteVersion {
		return ErrInvalidArgument.Wrap("route version %d: want 1..%d (0 means no master)", r.Version, uint64(MaxRouteVersion))
	}
	return nil
}

// NextEpoch is the epoch rule every implementation applies atomically:
// one above the last epoch, but never below the store's time in
// microseconds, so epochs keep increasing across a loss of the store's data.
func NextEpoch(last Epoch, now time.Time) Epoch {
	e := last + 1
	if us := now.UnixMicro(); us > 0 && Epoch(us) > e {
		e = Epoch(us)
	}
	return e
}
