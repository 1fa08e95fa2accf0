package econ

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/proto/econpb"
)

// Codes of the client.
const (
	// CodeOutcomeUnknown: Record gave up after an attempt whose outcome it
	// could not learn (a timeout, a lost reply). The movement may or may not
	// be journaled; send it again with the same key to find out (it is never
	// counted twice).
	CodeOutcomeUnknown = "ECON.OUTCOME_UNKNOWN"
	// CodeNoOwner: the client knows no live member to send to (no econ
	// member, or the owner publishes no address).
	CodeNoOwner = "ECON.NO_OWNER"
	// CodeClientClosed: the client was closed.
	CodeClientClosed = "ECON.CLIENT_CLOSED"
)

var (
	// ErrOutcomeUnknown matches *OutcomeUnknownError.
	ErrOutcomeUnknown = errcode.New(CodeOutcomeUnknown, "econ: outcome unknown; retry with the same key")
	// ErrNoOwner: no live member to send to.
	ErrNoOwner = errcode.New(CodeNoOwner, "econ: no live economy member to send to")
	// ErrClientClosed: the client was closed.
	ErrClientClosed = errcode.New(CodeClientClosed, "econ: client closed")
)

// OutcomeUnknownError is Record giving up when at least one attempt may have
// reached the node (the reply was lost or late). Err is the last attempt's
// error; Attempts how many were made.
type OutcomeUnknownError struct {
	Key      string
	Attempts int
	Err      error
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("econ: outcome of movement %q unknown after %d attempts (retry with the same key): %v", e.Key, e.Attempts, e.Err)
}

// ErrorCode returns ECON.OUTCOME_UNKNOWN.
func (e *OutcomeUnknownError) ErrorCode() string { return CodeOutcomeUnknown }

// Is makes errors.Is(err, ErrOutcomeUnknown) true.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// Unwrap returns the last attempt's error.
func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// ClientConfig configures a Client. Zero fields take the defaults documented
// per field.
type ClientConfig struct {
	// Members is where the client learns the live economy members (role
	// "econ"; their service address under Addrs["econ"]): a *coord.Client,
	// or StaticMembers. Required; the client does not close it.
	Members MemberSource
	// TLS secures every connection (its ServerName, when empty, is the host
	// of the member's address). nil requires Insecure.
	TLS *tls.Config
	// Insecure allows plaintext connections, to loopback addresses only: a
	// member whose address is not loopback is refused (CONFIG.INVALID).
	Insecure bool
	// AttemptTimeout bounds one call of Record, Balances or Pending to one
	// node: past it the reply is taken as lost and the call retried. The
	// operator calls (SettleAll, Recover, Sweep) have no attempt timeout,
	// only the caller's context. Keep it above the nodes' ReadyWait (5s by
	// default), or a node still re-forming looks like a lost reply. Default
	// 10s.
	AttemptTimeout time.Duration
	// MaxAttempts bounds the attempts of one call (a retry follows a
	// not-ready node, an unreachable one, or a lost reply). Default 30:
	// with the default backoff, about 25 s of waiting, enough to ride out a
	// node's death (its lease TTL, 10 s by default, then the re-form).
	MaxAttempts int
	// MaxRedirects bounds the misroutes one attempt follows before it waits
	// and starts over from the client's own view. Default 3.
	MaxRedirects int
	// BackoffMin and BackoffMax bound the wait before a retry: it doubles
	// from BackoffMin up to BackoffMax, with jitter. Defaults 20ms and 1s.
	BackoffMin, BackoffMax time.Duration
	// Clock times the waits between attempts. Default clock.Real().
	Clock clock.Clock
	// Logger; default discard.
	Logger *slog.Logger
	// DialOptions are added to every connection (interceptors, keepalive).
	DialOptions []grpc.DialOption
}

// Validate reports the first invalid field, naming it.
func (c ClientConfig) Validate() error {
	switch {
	case c.Members == nil:
		return errcode.Config("Members", nil, "is required")
	case c.TLS == nil && !c.Insecure:
		return errcode.Config("TLS", nil, "is required unless Insecure is set (plaintext, to loopback addresses only)")
	case c.TLS != nil && c.Insecure:
		return errcode.Config("Insecure", c.Insecure, "contradicts a TLS configuration; set one of them")
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"AttemptTimeout", c.AttemptTimeout}, {"BackoffMin", c.BackoffMin}, {"BackoffMax", c.BackoffMax}} {
		if d.v < 0 {
			return errcode.Config(d.field, d.v, "must not be negative")
		}
	}
	if c.MaxAttempts < 0 {
		return errcode.Config("MaxAttempts", c.MaxAttempts, "must not be negative")
	}
	if c.MaxRedirects < 0 {
		return errcode.Config("MaxRedirects", c.MaxRedirects, "must not be negative")
	}
	if w := c.WithDefaults(); w.BackoffMax < w.BackoffMin {
		return errcode.Config("BackoffMax", c.BackoffMax, fmt.Sprintf("must be at least BackoffMin (%s)", w.BackoffMin))
	}
	return nil
}

// WithDefaults fills the zero fields.
func (c ClientConfig) WithDefaults() ClientConfig {
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = 10 * time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 30
	}
	if c.MaxRedirects == 0 {
		c.MaxRedirects = 3
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = 20 * time.Millisecond
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = time.Second
	}
	c.Clock = clock.OrReal(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Client calls economy nodes over gRPC. It routes a scope to its owner by
// rendezvous placement over the live econ members' names (the placement the
// nodes use, netting.ScopeRouter), follows a misroute's owner, and retries
// with the same movement key while the outcome is unknown, so a movement is
// never counted twice. It keeps one connection per member address, dialled
// on first use. Its methods are safe for concurrent use.
type Client struct {
	cfg ClientConfig
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	view clientView // guarded by mu
	// changed is closed (and replaced) on every change the member watch
	// reports: a retry waiting out its backoff goes at once, since a node
	// that joined, left or adopted a view is what it was waiting for.
	changed chan struct{}               // guarded by mu
	conns   map[string]*grpc.ClientConn // by address; guarded by mu
	closed  bool                        // guarded by mu

	closeOnce sync.Once
	closeErr  error
}

// clientView is the client's picture of the econ members.
type clientView struct {
	members map[coord.NodeID]coord.Member // econ role only
	names   []string                      // sorted
	addrs   map[string]string             // name → econ address
	owner   func(scope string) string     // nil when there is no member
}

func newClientView(members map[coord.NodeID]coord.Member) clientView {
	v := clientView{members: members, addrs: map[string]string{}}
	for _, m := range members {
		v.names = append(v.names, m.Name)
		v.addrs[m.Name] = m.Addrs[AddrKey]
	}
	slices.Sort(v.names)
	v.names = slices.Compact(v.names)
	if len(v.names) > 0 {
		// Sorted and duplicate-free, as the nodes' own view is, so the
		// owner function is theirs exactly.
		v.owner, _ = netting.ScopeRouter(v.names)
	}
	return v
}

// NewClient validates cfg, reads the live members and starts following
// them. ctx bounds the first read only.
func NewClient(ctx context.Context, cfg ClientConfig) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	c := &Client{cfg: cfg, log: cfg.Logger, conns: map[string]*grpc.ClientConn{}, changed: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	events, stop, err := c.watch(ctx)
	if err != nil {
		c.cancel()
		return nil, err
	}
	c.wg.Go(func() { c.follow(events, stop) })
	return c, nil
}

// watch starts a member watch and then lists the members, replacing the
// view with the list. The list is read after the watch has taken its own
// snapshot, so the watch's events from there on lead to the true set (a
// member the list no longer has may reappear from the watch's first joins
// until the watch reports it gone, a moment later).
//
// The watch lives until the client closes or stop is called; the caller
// reads events until the channel closes.
func (c *Client) watch(ctx context.Context) (events <-chan coord.MembershipEvent, stop context.CancelFunc, err error) {
	wctx, stop := context.WithCancel(c.ctx)
	events, err = c.cfg.Members.WatchMembers(wctx)
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("econ: watch members: %w", err)
	}
	ms, err := c.cfg.Members.Members(ctx)
	if err != nil {
		stop()
		for range events {
		}
		return nil, nil, fmt.Errorf("econ: list members: %w", err)
	}
	members := map[coord.NodeID]coord.Member{}
	for _, m := range ms {
		if m.Role == Role {
			members[m.ID] = m
		}
	}
	c.setView(members)
	return events, stop, nil
}

// follow applies membership events to the view until the client closes,
// watching again (after a pause) if the watch ends under it.
func (c *Client) follow(events <-chan coord.MembershipEvent, stop context.CancelFunc) {
	for attempt := 1; ; attempt++ {
		for ev := range events {
			c.apply(ev)
		}
		stop()
		if c.ctx.Err() != nil {
			return
		}
		c.log.Warn("econ: member watch ended; watching again")
		for {
			if clock.Sleep(c.ctx, c.cfg.Clock, c.backoffDelay("watch", attempt)) != nil {
				return
			}
			var err error
			if events, stop, err = c.watch(c.ctx); err == nil {
				break
			}
			c.log.Warn("econ: member watch failed", "err", err)
			attempt++
		}
	}
}

func (c *Client) apply(ev coord.MembershipEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	members := make(map[coord.NodeID]coord.Member, len(c.view.members)+1)
	for id, m := range c.view.members {
		members[id] = m
	}
	switch {
	case ev.Kind == coord.MemberLeft || ev.Member.Role != Role:
		delete(members, ev.Member.ID)
	default:
		members[ev.Member.ID] = ev.Member
	}
	c.setViewLocked(members)
}

func (c *Client) setView(members map[coord.NodeID]coord.Member) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setViewLocked(members)
}

// setViewLocked installs a view and closes the connections to addresses no
// member has any more (a call still on one fails and is retried).
func (c *Client) setViewLocked(members map[coord.NodeID]coord.Member) {
	c.view = newClientView(members)
	close(c.changed)
	c.changed = make(chan struct{})
	live := map[string]bool{}
	for _, a := range c.view.addrs {
		live[a] = true
	}
	for addr, cc := range c.conns {
		if !live[addr] {
			_ = cc.Close()
			delete(c.conns, addr)
		}
	}
}

// View returns the sorted names of the econ members the client routes over.
func (c *Client) View() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.view.names)
}

// OwnerOf returns the member that owns scope under the client's view, and
// false when the client knows no member.
func (c *Client) OwnerOf(scope string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.view.owner == nil {
		return "", false
	}
	return c.view.owner(scope), true
}

// target is one node to call.
type target struct{ name, addr string }

// ownerTarget returns the owner of scope under the view.
func (c *Client) ownerTarget(scope string) (target, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.view.owner == nil {
		return target{}, ErrNoOwner.Wrap("no econ member")
	}
	name := c.view.owner(scope)
	if c.view.addrs[name] == "" {
		return target{}, ErrNoOwner.Wrap("member %s publishes no %q address", name, AddrKey)
	}
	return target{name: name, addr: c.view.addrs[name]}, nil
}

// memberTarget returns the named member, or, for name "", the attempt-th
// member of the view (reads go to any node; each retry to the next one).
func (c *Client) memberTarget(name string, attempt int) (target, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if name == "" {
		var withAddr []string
		for _, n := range c.view.names {
			if c.view.addrs[n] != "" {
				withAddr = append(withAddr, n)
			}
		}
		if len(withAddr) == 0 {
			return target{}, ErrNoOwner.Wrap("no econ member with an address")
		}
		name = withAddr[attempt%len(withAddr)]
	}
	if c.view.addrs[name] == "" {
		return target{}, ErrNoOwner.Wrap("member %s unknown or without a %q address", name, AddrKey)
	}
	return target{name: name, addr: c.view.addrs[name]}, nil
}

// stub returns the service stub for addr, dialling it on first use.
func (c *Client) stub(addr string) (econpb.EconomyClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClientClosed
	}
	if cc := c.conns[addr]; cc != nil {
		return econpb.NewEconomyClient(cc), nil
	}
	creds := insecure.NewCredentials()
	if c.cfg.TLS != nil {
		creds = credentials.NewTLS(c.cfg.TLS.Clone())
	} else if !isLoopback(addr) {
		return nil, errcode.Config("Insecure", true, fmt.Sprintf("member address %q is not a loopback address; plaintext goes to loopback only: set TLS", addr))
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, c.cfg.DialOptions...)
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("econ: dial %s: %w", addr, err)
	}
	c.conns[addr] = cc
	return econpb.NewEconomyClient(cc), nil
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// retryable reports whether an attempt's error is worth another attempt
// (while the caller's context lasts), and whether the attempt may have
// reached the node with its reply lost (outcome unknown).
func retryable(err error) (retry, unknown bool) {
	var re *RemoteError
	switch {
	case errors.As(err, &re):
		switch re.GRPC {
		case codes.Unavailable:
			// With a code the node refused before recording (not ready,
			// closed, fenced); without one the transport failed, maybe
			// after the request went out.
			return true, re.Code == ""
		case codes.Aborted:
			return true, false
		case codes.DeadlineExceeded, codes.Canceled, codes.Internal, codes.Unknown:
			return true, true
		}
		return false, false
	case errors.Is(err, netting.ErrMisrouted), errors.Is(err, ErrNoOwner):
		return true, false
	}
	return false, false
}

// Record records m under scope on the node that owns it (see Client).
// A movement that fails the service's checks is refused here, with the
// same *RequestError the server would send. After MaxAttempts, or when ctx
// ends, an attempt whose outcome was unknown makes the error an
// *OutcomeUnknownError; otherwise it is the last attempt's (a *RemoteError
// with the node's code, or a *netting.MisroutedError when the redirects ran
// out).
func (c *Client) Record(ctx context.Context, scope string, m netting.Movement) (netting.Outcome, error) {
	req, err := EncodeRecordRequest(scope, m)
	if err != nil {
		return netting.Outcome{}, err
	}
	var last error
	unknown := false
	attempts := 0
	for attempts < c.cfg.MaxAttempts {
		if attempts > 0 {
			if c.backoff(ctx, c.backoffDelay(m.Key, attempts)) != nil {
				break
			}
		}
		attempts++
		out, err := c.recordOnce(ctx, scope, req)
		if err == nil {
			return out, nil
		}
		last = err
		retry, maybe := retryable(err)
		unknown = unknown || maybe
		if !retry || ctx.Err() != nil {
			break
		}
		c.log.Debug("econ: record attempt failed; retrying with the same key", "scope", scope, "key", m.Key, "attempt", attempts, "code", errcode.Of(err), "err", err)
	}
	if ctx.Err() != nil {
		last = errors.Join(last, ctx.Err())
	}
	if unknown {
		return netting.Outcome{}, &OutcomeUnknownError{Key: m.Key, Attempts: attempts, Err: last}
	}
	return netting.Outcome{}, last
}

// recordOnce is one attempt: the owner under the view, then each misroute's
// owner, at most MaxRedirects of them.
func (c *Client) recordOnce(ctx context.Context, scope string, req *econpb.RecordRequest) (netting.Outcome, error) {
	t, err := c.ownerTarget(scope)
	if err != nil {
		return netting.Outcome{}, err
	}
	for hops := 0; ; hops++ {
		var resp *econpb.RecordResponse
		err := c.call(ctx, t, c.cfg.AttemptTimeout, func(ctx context.Context, s econpb.EconomyClient) (err error) {
			resp, err = s.Record(ctx, req)
			return err
		})
		if err != nil {
			return netting.Outcome{}, err
		}
		switch r := resp.GetResult().(type) {
		case *econpb.RecordResponse_Outcome:
			return outcomeFromPB(r.Outcome)
		case *econpb.RecordResponse_Misroute:
			mis := &netting.MisroutedError{Scope: scope, Owner: r.Misroute.GetOwner(), NodeID: cmpOr(resp.GetNode(), t.name)}
			if hops >= c.cfg.MaxRedirects || mis.Owner == "" || mis.Owner == t.name {
				return netting.Outcome{}, mis
			}
			// The reply's address is the fresher: the node read it from
			// etcd just now; ours may predate the owner's (re)start.
			next := target{name: mis.Owner, addr: r.Misroute.GetOwnerAddr()}
			if next.addr == "" {
				c.mu.Lock()
				next.addr = c.view.addrs[mis.Owner]
				c.mu.Unlock()
			}
			if next.addr == "" {
				return netting.Outcome{}, mis
			}
			c.log.Debug("econ: following a misroute", "scope", scope, "from", t.name, "owner", next.name)
			t = next
		default:
			return netting.Outcome{}, &RemoteError{GRPC: codes.Internal, Code: CodeInternal, Node: t.name, Message: "reply has neither outcome nor misroute"}
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// call runs f against t's stub under an attempt timeout (0: none) and turns
// a failure into a *RemoteError naming the node.
func (c *Client) call(ctx context.Context, t target, timeout time.Duration, f func(context.Context, econpb.EconomyClient) error) error {
	s, err := c.stub(t.addr)
	if err != nil {
		return err
	}
	actx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := f(actx, s); err != nil {
		return errorFromStatus(err, t.name)
	}
	return nil
}

// withRetry calls member (any member for "") with the client's retry
// policy. The calls it serves are reads and idempotent operator actions, so
// an unknown outcome needs no special report.
func (c *Client) withRetry(ctx context.Context, member string, timeout time.Duration, f func(context.Context, econpb.EconomyClient) error) error {
	var last error
	for attempt := 0; attempt < c.cfg.MaxAttempts; attempt++ {
		if attempt > 0 {
			if err := clock.Sleep(ctx, c.cfg.Clock, c.backoffDelay(member, attempt)); err != nil {
				return errors.Join(last, err)
			}
		}
		t, err := c.memberTarget(member, attempt)
		if err == nil {
			err = c.call(ctx, t, timeout, f)
		}
		if err == nil {
			return nil
		}
		last = err
		if retry, _ := retryable(err); !retry {
			return err
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
	}
	return last
}

// Balance is one account's balance and pending reservations, in minor units.
type Balance struct {
	Account string
	// Balance is the settled balance (credits minus debits).
	Balance int64
	// Pending is the sum of the balance changes of accepted, unsettled
	// movements; a wallet can promise at most Balance + Pending more.
	Pending int64
}

// Balances reads accounts' balances and pending reservations (any node
// answers, from the shared store), in the order given.
func (c *Client) Balances(ctx context.Context, accounts ...string) ([]Balance, error) {
	req := &econpb.BalancesRequest{Accounts: accounts}
	if err := CheckBalancesRequest(req); err != nil {
		return nil, err
	}
	var resp *econpb.BalancesResponse
	err := c.withRetry(ctx, "", c.cfg.AttemptTimeout, func(ctx context.Context, s econpb.EconomyClient) (err error) {
		resp, err = s.Balances(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.GetBalances()) != len(accounts) {
		return nil, fmt.Errorf("econ: Balances answered %d accounts for %d asked", len(resp.GetBalances()), len(accounts))
	}
	out := make([]Balance, len(accounts))
	for i, b := range resp.GetBalances() {
		out[i] = Balance{Account: b.GetAccount(), Balance: b.GetBalance(), Pending: b.GetPending()}
	}
	return out, nil
}

// Pending returns every nonzero pending reservation counter, reading page
// after page. Pages are read one at a time, so under concurrent movements
// the result is not one snapshot.
func (c *Client) Pending(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	after := ""
	for {
		var resp *econpb.PendingResponse
		req := &econpb.PendingRequest{After: after}
		err := c.withRetry(ctx, "", c.cfg.AttemptTimeout, func(ctx context.Context, s econpb.EconomyClient) (err error) {
			resp, err = s.Pending(ctx, req)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, p := range resp.GetPending() {
			out[p.GetAccount()] = p.GetPending()
		}
		if resp.GetNextAfter() == "" {
			return out, nil
		}
		if resp.GetNextAfter() <= after {
			return nil, fmt.Errorf("econ: Pending page cursor went from %q to %q", after, resp.GetNextAfter())
		}
		after = resp.GetNextAfter()
	}
}

// Health asks member for its status.
func (c *Client) Health(ctx context.Context, member string) (Status, error) {
	var resp *econpb.HealthResponse
	err := c.withRetry(ctx, member, c.cfg.AttemptTimeout, func(ctx context.Context, s econpb.EconomyClient) (err error) {
		resp, err = s.Health(ctx, &econpb.HealthRequest{})
		return err
	})
	if err != nil {
		return Status{}, err
	}
	return Status{Name: resp.GetName(), Ready: resp.GetReady(), View: resp.GetView(), ViewID: resp.GetViewId()}, nil
}

// MemberAddr is one live economy member as Members reports it: its name
// (what scopes are placed on) and its service address ("" when it publishes
// none).
type MemberAddr struct {
	Name string
	Addr string
}

// Members asks member (any member for "") for the live economy members and
// their addresses, sorted by name. The client itself follows the membership
// through its MemberSource; this call is what a caller without etcd uses.
func (c *Client) Members(ctx context.Context, member string) ([]MemberAddr, error) {
	var resp *econpb.MembersResponse
	err := c.withRetry(ctx, member, c.cfg.AttemptTimeout, func(ctx context.Context, s econpb.EconomyClient) (err error) {
		resp, err = s.Members(ctx, &econpb.MembersRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]MemberAddr, 0, len(resp.GetMembers()))
	for _, m := range resp.GetMembers() {
		out = append(out, MemberAddr{Name: m.GetName(), Addr: m.GetAddr()})
	}
	return out, nil
}

// SettleAll asks member to settle every open session it has (an operator
// action; bounded by ctx only).
func (c *Client) SettleAll(ctx context.Context, member string) ([]netting.SettleReport, error) {
	var resp *econpb.SettleResponse
	err := c.withRetry(ctx, member, 0, func(ctx context.Context, s econpb.EconomyClient) (err error) {
		resp, err = s.Settle(ctx, &econpb.SettleRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	reps := make([]netting.SettleReport, 0, len(resp.GetReports()))
	for _, r := range resp.GetReports() {
		reps = append(reps, settleReportFromPB(r))
	}
	return reps, nil
}

// Recover asks member to rebuild sessionID from the store and finish its
// settle (an operator action; bounded by ctx only).
func (c *Client) Recover(ctx context.Context, member, sessionID string) (netting.SettleReport, error) {
	req := &econpb.RecoverRequest{SessionId: sessionID}
	if err := CheckRecoverRequest(req); err != nil {
		return netting.SettleReport{}, err
	}
	var resp *econpb.RecoverResponse
	err := c.withRetry(ctx, member, 0, func(ctx context.Context, s econpb.EconomyClient) (err error) {
		resp, err = s.Recover(ctx, req)
		return err
	})
	if err != nil {
		return netting.SettleReport{}, err
	}
	return settleReportFromPB(resp.GetReport()), nil
}

// Sweep asks member to run one orphan sweep now (an operator action;
// bounded by ctx only).
func (c *Client) Sweep(ctx context.Context, member string) (netting.SweepSummary, error) {
	var resp *econpb.SweepResponse
	err := c.withRetry(ctx, member, 0, func(ctx context.Context, s econpb.EconomyClient) (err error) {
		resp, err = s.Sweep(ctx, &econpb.SweepRequest{})
		return err
	})
	if err != nil {
		return netting.SweepSummary{}, err
	}
	return sweepFromPB(resp), nil
}

// backoffDelay is the wait before attempt (≥ 1): BackoffMin doubled per
// attempt up to BackoffMax, the upper half jittered by a hash of salt and
// attempt (deterministic, so a test's fake clock knows what to expect within
// bounds, and callers retrying different keys spread out).
// backoff waits d, or until the member watch reports a change, or ctx ends.
func (c *Client) backoff(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	changed := c.changed
	c.mu.Unlock()
	t := c.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
		return nil
	case <-t.C():
		return nil
	}
}

func (c *Client) backoffDelay(salt string, attempt int) time.Duration {
	d := c.cfg.BackoffMin
	for i := 1; i < attempt && d < c.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, c.cfg.BackoffMax)
	h := fnv.New64a()
	h.Write([]byte(salt + "#" + strconv.Itoa(attempt)))
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + time.Duration(h.Sum64()%uint64(half))
}

// Close stops following the membership and closes every connection; calls
// still running fail. Idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		c.mu.Lock()
		c.closed = true
		var errs []error
		for addr, cc := range c.conns {
			if err := cc.Close(); err != nil {
				errs = append(errs, fmt.Errorf("econ: close connection to %s: %w", addr, err))
			}
		}
		c.conns = nil
		c.mu.Unlock()
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// StaticMembers is a fixed member list as a MemberSource: for a cluster
// whose members never change, and for tests that need a caller with a view
// of its own.
type StaticMembers []coord.Member

// Members returns the list.
func (s StaticMembers) Members(context.Context) ([]coord.Member, error) { return slices.Clone(s), nil }

// WatchMembers delivers MemberJoined for each member, then nothing until ctx
// ends, when the channel closes.
func (s StaticMembers) WatchMembers(ctx context.Context) (<-chan coord.MembershipEvent, error) {
	ch := make(chan coord.MembershipEvent)
	go func() {
		defer close(ch)
		for _, m := range s {
			select {
			case ch <- coord.MembershipEvent{Kind: coord.MemberJoined, Member: m}:
			case <-ctx.Done():
				return
			}
		}
		<-ctx.Done()
	}()
	return ch, nil
}
