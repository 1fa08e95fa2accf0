package econ

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/proto/econpb"
)

// MemberSource is where the service's two sides learn the live members:
// *coord.Client implements it; StaticMembers is a fixed list.
type MemberSource interface {
	// Members lists the live members.
	Members(ctx context.Context) ([]coord.Member, error)
	// WatchMembers delivers MemberJoined for every live member, then every
	// change, until ctx ends (coord.Client.WatchMembers' contract).
	WatchMembers(ctx context.Context) (<-chan coord.MembershipEvent, error)
}

var _ MemberSource = (*coord.Client)(nil)

// ownerLookupTimeout bounds the membership read that finds a misroute's
// owner address; past it the reply carries the owner's name alone.
const ownerLookupTimeout = 2 * time.Second

// Server serves one Node as the gRPC service shardwise.econ.v1.Economy
// (proto/econ.proto, docs/protocol.md). It validates every request before
// the node sees it (the limits in wire.go, and, on a grpc.Server made with
// ServerOptions, the bytes themselves: codec.go; a refused request writes
// nothing, and a request is judged before its scope is routed, so an
// invalid one is OP.MALFORMED at any node), answers a misroute in the reply with the owner's name and
// address, and reports errors as gRPC statuses with the stable code in an
// ErrorInfo (StatusOf). It starts no goroutines; transport security is the
// grpc.Server's the caller registers it on.
type Server struct {
	econpb.UnimplementedEconomyServer
	node    *Node
	members MemberSource
	log     *slog.Logger
}

// ServerOption configures a Server.
type ServerOption func(*Server)

// WithServerMembers sets where the server looks up a misroute's owner
// address. Default: the node's coord client.
func WithServerMembers(src MemberSource) ServerOption {
	return func(s *Server) { s.members = src }
}

// WithServerLogger sets the server's logger. Default: the discard logger.
func WithServerLogger(l *slog.Logger) ServerOption {
	return func(s *Server) { s.log = l }
}

// NewServer returns the service of node (not nil). Register it on a grpc.Server with
// Register.
func NewServer(node *Node, opts ...ServerOption) *Server {
	s := &Server{node: node}
	for _, o := range opts {
		o(s)
	}
	if s.members == nil && node.cfg.Coord != nil {
		s.members = node.cfg.Coord
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("node", node.Name())
	return s
}

// Register registers the service on g.
func (s *Server) Register(g grpc.ServiceRegistrar) { econpb.RegisterEconomyServer(g, s) }

// fail turns err into the status the caller gets, logging what is not the
// caller's fault.
func (s *Server) fail(method string, err error) error {
	st := StatusOf(err)
	switch st.Code() {
	case codes.Internal, codes.DataLoss:
		s.log.Warn("econ: call failed", "method", method, "err", err)
	}
	return st.Err()
}

// Record implements econpb.EconomyServer.
func (s *Server) Record(ctx context.Context, req *econpb.RecordRequest) (*econpb.RecordResponse, error) {
	if err := decodeFailure(req); err != nil {
		return nil, s.fail("Record", err)
	}
	scope, m, err := DecodeRecordRequest(req)
	if err != nil {
		return nil, s.fail("Record", err)
	}
	out, err := s.node.Record(ctx, scope, m)
	var mis *netting.MisroutedError
	if errors.As(err, &mis) {
		return &econpb.RecordResponse{Node: s.node.Name(), Result: &econpb.RecordResponse_Misroute{Misroute: &econpb.Misroute{
			Scope: mis.Scope, Owner: mis.Owner, OwnerAddr: s.ownerAddr(ctx, mis.Owner),
		}}}, nil
	}
	if err != nil {
		return nil, s.fail("Record", err)
	}
	return &econpb.RecordResponse{Node: s.node.Name(), Result: &econpb.RecordResponse_Outcome{Outcome: outcomeToPB(out)}}, nil
}

// ownerAddr looks up the econ address of the member named owner, or ""
// when it cannot (no member source, etcd slow, the owner has none). A
// misroute is rare (a caller's view is stale), so it reads the membership
// each time rather than keeping a copy that could itself be stale.
func (s *Server) ownerAddr(ctx context.Context, owner string) string {
	if s.members == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, ownerLookupTimeout)
	defer cancel()
	ms, err := s.members.Members(ctx)
	if err != nil {
		s.log.Debug("econ: misroute owner lookup failed", "owner", owner, "err", err)
		return ""
	}
	for _, m := range ms {
		if m.Role == Role && m.Name == owner {
			return m.Addrs[AddrKey]
		}
	}
	return ""
}

// Balances implements econpb.EconomyServer.
func (s *Server) Balances(ctx context.Context, req *econpb.BalancesRequest) (*econpb.BalancesResponse, error) {
	if err := decodeFailure(req); err != nil {
		return nil, s.fail("Balances", err)
	}
	if err := CheckBalancesRequest(req); err != nil {
		return nil, s.fail("Balances", err)
	}
	store := s.node.Store()
	resp := &econpb.BalancesResponse{Balances: make([]*econpb.AccountBalance, 0, len(req.GetAccounts()))}
	for _, a := range req.GetAccounts() {
		bal, err := store.Balance(ctx, a)
		if err != nil {
			return nil, s.fail("Balances", err)
		}
		pend, err := store.Pending(ctx, a)
		if err != nil {
			return nil, s.fail("Balances", err)
		}
		resp.Balances = append(resp.Balances, &econpb.AccountBalance{Account: a, Balance: bal, Pending: pend})
	}
	return resp, nil
}

// Pending implements econpb.EconomyServer. It reads every counter and sorts
// them for each page: the counters are one per account with an unsettled
// movement, few enough for that.
func (s *Server) Pending(ctx context.Context, req *econpb.PendingRequest) (*econpb.PendingResponse, error) {
	if err := decodeFailure(req); err != nil {
		return nil, s.fail("Pending", err)
	}
	limit, err := CheckPendingRequest(req)
	if err != nil {
		return nil, s.fail("Pending", err)
	}
	all, err := s.node.Store().PendingAll(ctx)
	if err != nil {
		return nil, s.fail("Pending", err)
	}
	page := make([]*econpb.AccountPending, 0, min(limit, len(all)))
	for a, p := range all {
		if p != 0 && a > req.GetAfter() {
			page = append(page, &econpb.AccountPending{Account: a, Pending: p})
		}
	}
	slices.SortFunc(page, func(x, y *econpb.AccountPending) int { return cmp.Compare(x.Account, y.Account) })
	resp := &econpb.PendingResponse{Pending: page}
	if len(page) > limit {
		resp.Pending = page[:limit]
		resp.NextAfter = page[limit-1].Account
	}
	return resp, nil
}

// Settle implements econpb.EconomyServer.
func (s *Server) Settle(ctx context.Context, req *econpb.SettleRequest) (*econpb.SettleResponse, error) {
	// Garbage is not an empty request: an operator action must not run
	// on bytes that are not its message.
	if err := decodeFailure(req); err != nil {
		return nil, s.fail("Settle", err)
	}
	reps, err := s.node.SettleAll(ctx)
	if err != nil {
		return nil, s.fail("Settle", err)
	}
	resp := &econpb.SettleResponse{}
	for _, r := range reps {
		resp.Reports = append(resp.Reports, settleReportToPB(r))
	}
	return resp, nil
}

// Recover implements econpb.EconomyServer.
func (s *Server) Recover(ctx context.Context, req *econpb.RecoverRequest) (*econpb.RecoverResponse, error) {
	if err := decodeFailure(req); err != nil {
		return nil, s.fail("Recover", err)
	}
	if err := CheckRecoverRequest(req); err != nil {
		return nil, s.fail("Recover", err)
	}
	rep, err := s.node.Recover(ctx, req.GetSessionId())
	if err != nil {
		return nil, s.fail("Recover", err)
	}
	return &econpb.RecoverResponse{Report: settleReportToPB(rep)}, nil
}

// Sweep implements econpb.EconomyServer.
func (s *Server) Sweep(ctx context.Context, req *econpb.SweepRequest) (*econpb.SweepResponse, error) {
	if err := decodeFailure(req); err != nil {
		return nil, s.fail("Sweep", err)
	}
	sum, err := s.node.Sweep(ctx)
	if err != nil {
		return nil, s.fail("Sweep", err)
	}
	return sweepToPB(sum), nil
}

// Members implements econpb.EconomyServer: the live econ members, read from
// the membership now (not the node's view, which can lag it while the node
// re-forms), so that a caller in any language can place scopes without
// reading etcd. A node with no member source answers with its own view,
// without addresses.
func (s *Server) Members(ctx context.Context, req *econpb.MembersRequest) (*econpb.MembersResponse, error) {
	if err := decodeFailure(req); err != nil {
		return nil, s.fail("Members", err)
	}
	resp := &econpb.MembersResponse{Node: s.node.Name()}
	if s.members == nil {
		for _, name := range s.node.Status().View {
			resp.Members = append(resp.Members, &econpb.EconMember{Name: name})
		}
		return resp, nil
	}
	ms, err := s.members.Members(ctx)
	if err != nil {
		return nil, s.fail("Members", fmt.Errorf("econ: read members: %w", err))
	}
	byName := map[string]string{}
	for _, m := range ms {
		if m.Role != Role {
			continue
		}
		// Two records under one name (a restart whose old lease has not
		// expired yet) are one name for placement; keep an address.
		if a, ok := byName[m.Name]; !ok || a == "" {
			byName[m.Name] = m.Addrs[AddrKey]
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		resp.Members = append(resp.Members, &econpb.EconMember{Name: name, Addr: byName[name]})
	}
	return resp, nil
}

// Health implements econpb.EconomyServer.
func (s *Server) Health(_ context.Context, req *econpb.HealthRequest) (*econpb.HealthResponse, error) {
	if err := decodeFailure(req); err != nil {
		return nil, s.fail("Health", err)
	}
	st := s.node.Status()
	return &econpb.HealthResponse{Name: st.Name, Ready: st.Ready, View: st.View, ViewId: st.ViewID}, nil
}
