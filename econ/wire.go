package econ

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/proto/econpb"
)

// This file is the economy service's wire form, shared by Server and Client:
// the request limits and their validation, the conversions between
// proto/econ.proto's messages and netting's types, and the mapping of errors
// to gRPC statuses (and back) with the stable code in a google.rpc.ErrorInfo.
// Everything here is a pure function.

// Limits of the economy service. A request over one is refused with
// OP.MALFORMED naming the field, before anything reaches the node.
const (
	// MaxScopeBytes bounds a scope's length.
	MaxScopeBytes = 128
	// MaxKeyBytes bounds a movement key's length.
	MaxKeyBytes = 256
	// MaxAccountBytes bounds an account name's length.
	MaxAccountBytes = 128
	// MaxLegs bounds the legs of one movement.
	MaxLegs = 64
	// MaxBalanceAccounts bounds the accounts of one Balances request.
	MaxBalanceAccounts = 256
	// DefaultPendingPage and MaxPendingPage are a Pending page's default and
	// largest size.
	DefaultPendingPage = 1000
	MaxPendingPage     = 10000
	// MaxSessionIDBytes bounds the session id of a Recover request.
	MaxSessionIDBytes = 512
)

// ErrorDomain is the domain of every google.rpc.ErrorInfo the service sends.
const ErrorDomain = "econ.shardwise"

// CodeInternal is the code of a failure that has no code of its own (a store
// that could not be reached, a bug): the outcome of a Record is unknown.
const CodeInternal = "ECON.INTERNAL"

// RequestError is a request the service refused before it reached the node:
// Field names the request field as it is on the wire ("legs[2].amount"; empty
// when the fault is the message as a whole), Reason says what is wrong. Its
// code is OP.MALFORMED (errors.Is ledger.ErrMalformed), or the code of Err
// when set: the ledger's own when the ledger refused the legs
// (LEDGER.UNBALANCED), OP.TOO_LARGE (ErrTooLarge) for a message over
// MaxRequestBytes.
type RequestError struct {
	Field  string
	Reason string
	Err    error
}

func (e *RequestError) Error() string {
	if e.Field == "" {
		return "econ: bad request: " + e.Reason
	}
	return "econ: bad request: " + e.Field + ": " + e.Reason
}

// ErrorCode returns OP.MALFORMED, or the code of Err when it has one.
func (e *RequestError) ErrorCode() string {
	if c := errcode.Of(e.Err); c != "" {
		return c
	}
	return ledger.CodeMalformed
}

// Is makes errors.Is(err, ledger.ErrMalformed) true for a shape refusal.
func (e *RequestError) Is(target error) bool {
	return e.Err == nil && target == ledger.ErrMalformed
}

// Unwrap returns the ledger's error, if the ledger refused the legs.
func (e *RequestError) Unwrap() error { return e.Err }

func badRequest(field, format string, args ...any) error {
	return &RequestError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// nameByte reports whether b may appear in a scope, key, account or session
// id: ASCII letters and digits and ". _ - : @ / + = # ~". In particular no
// space, no control byte, and neither "|" nor ";", which separate the fields
// of a journal row's hashed form (netting.ChainHash).
func nameByte(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	switch b {
	case '.', '_', '-', ':', '@', '/', '+', '=', '#', '~':
		return true
	}
	return false
}

// checkName checks one name field: 1..limit bytes, every byte a nameByte.
func checkName(field, s string, limit int) error {
	if s == "" {
		return badRequest(field, "is empty")
	}
	if len(s) > limit {
		return badRequest(field, "is %d bytes, more than %d", len(s), limit)
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return badRequest(field, "byte %d is %q; allowed are ASCII letters, digits and . _ - : @ / + = # ~", i, s[i])
		}
	}
	return nil
}

// CheckAccount checks an account name as the service accepts it in a leg:
// the name rule and length, and not the clearing account that only settles
// post to (ledger.NettingClearing). field is the name used in the error.
func CheckAccount(field, account string) error {
	if err := checkName(field, account, MaxAccountBytes); err != nil {
		return err
	}
	if account == ledger.NettingClearing {
		return badRequest(field, "%s is reserved for settles", ledger.NettingClearing)
	}
	return nil
}

// DecodeRecordRequest validates req and returns the scope and movement it
// asks for, or a *RequestError naming the first bad field. A movement it
// returns passes ledger.ValidateLegs.
func DecodeRecordRequest(req *econpb.RecordRequest) (scope string, m netting.Movement, err error) {
	if err := checkName("scope", req.GetScope(), MaxScopeBytes); err != nil {
		return "", netting.Movement{}, err
	}
	if err := checkName("key", req.GetKey(), MaxKeyBytes); err != nil {
		return "", netting.Movement{}, err
	}
	pbLegs := req.GetLegs()
	switch {
	case len(pbLegs) == 0:
		return "", netting.Movement{}, badRequest("legs", "is empty")
	case len(pbLegs) > MaxLegs:
		return "", netting.Movement{}, badRequest("legs", "has %d legs, more than %d", len(pbLegs), MaxLegs)
	}
	legs := make([]ledger.Leg, len(pbLegs))
	for i, l := range pbLegs {
		field := "legs[" + strconv.Itoa(i) + "]"
		if err := CheckAccount(field+".account", l.GetAccount()); err != nil {
			return "", netting.Movement{}, err
		}
		if l.GetAmount() <= 0 {
			return "", netting.Movement{}, badRequest(field+".amount", "is %d; amounts are positive minor units (the side gives the sign)", l.GetAmount())
		}
		switch l.GetSide() {
		case econpb.Side_SIDE_DEBIT:
			legs[i] = ledger.Debit(l.GetAccount(), l.GetAmount())
		case econpb.Side_SIDE_CREDIT:
			legs[i] = ledger.Credit(l.GetAccount(), l.GetAmount())
		default:
			return "", netting.Movement{}, badRequest(field+".side", "is %v; want SIDE_DEBIT or SIDE_CREDIT", l.GetSide())
		}
	}
	if err := ledger.ValidateLegs(legs); err != nil {
		return "", netting.Movement{}, &RequestError{Field: "legs", Reason: err.Error(), Err: err}
	}
	return req.GetScope(), netting.Movement{Key: req.GetKey(), Legs: legs}, nil
}

// EncodeRecordRequest is the inverse of DecodeRecordRequest, with the same
// checks: a request it returns decodes to scope and m.
func EncodeRecordRequest(scope string, m netting.Movement) (*econpb.RecordRequest, error) {
	req := &econpb.RecordRequest{Scope: scope, Key: m.Key, Legs: make([]*econpb.Leg, len(m.Legs))}
	for i, l := range m.Legs {
		pl := &econpb.Leg{Account: l.Account}
		switch {
		case l.Amount > 0:
			pl.Side, pl.Amount = econpb.Side_SIDE_DEBIT, l.Amount
		case l.Amount < 0 && l.Amount != math.MinInt64:
			pl.Side, pl.Amount = econpb.Side_SIDE_CREDIT, -l.Amount
		default:
			// 0, or MinInt64 whose magnitude has no int64: let decoding
			// name the field.
			pl.Side, pl.Amount = econpb.Side_SIDE_DEBIT, 0
		}
		req.Legs[i] = pl
	}
	if _, _, err := DecodeRecordRequest(req); err != nil {
		return nil, err
	}
	return req, nil
}

// CheckBalancesRequest validates a Balances request: 1..MaxBalanceAccounts
// accounts, each a well-formed name (the clearing account may be read).
func CheckBalancesRequest(req *econpb.BalancesRequest) error {
	accounts := req.GetAccounts()
	switch {
	case len(accounts) == 0:
		return badRequest("accounts", "is empty")
	case len(accounts) > MaxBalanceAccounts:
		return badRequest("accounts", "has %d accounts, more than %d", len(accounts), MaxBalanceAccounts)
	}
	for i, a := range accounts {
		if err := checkName("accounts["+strconv.Itoa(i)+"]", a, MaxAccountBytes); err != nil {
			return err
		}
	}
	return nil
}

// CheckPendingRequest validates a Pending request and returns its page size.
func CheckPendingRequest(req *econpb.PendingRequest) (limit int, err error) {
	if a := req.GetAfter(); a != "" {
		if err := checkName("after", a, MaxAccountBytes); err != nil {
			return 0, err
		}
	}
	switch l := req.GetLimit(); {
	case l == 0:
		return DefaultPendingPage, nil
	case l > MaxPendingPage:
		return 0, badRequest("limit", "is %d, more than %d", l, MaxPendingPage)
	default:
		return int(l), nil
	}
}

// CheckRecoverRequest validates a Recover request.
func CheckRecoverRequest(req *econpb.RecoverRequest) error {
	return checkName("session_id", req.GetSessionId(), MaxSessionIDBytes)
}

func outcomeToPB(o netting.Outcome) *econpb.Outcome {
	pb := &econpb.Outcome{Seq: o.Seq, Reason: o.Reason}
	switch o.Status {
	case netting.Accepted:
		pb.Status = econpb.Status_STATUS_ACCEPTED
	case netting.Rejected:
		pb.Status = econpb.Status_STATUS_REJECTED
	}
	return pb
}

func outcomeFromPB(pb *econpb.Outcome) (netting.Outcome, error) {
	o := netting.Outcome{Seq: pb.GetSeq(), Reason: pb.GetReason()}
	switch pb.GetStatus() {
	case econpb.Status_STATUS_ACCEPTED:
		o.Status = netting.Accepted
	case econpb.Status_STATUS_REJECTED:
		o.Status = netting.Rejected
	default:
		return netting.Outcome{}, fmt.Errorf("econ: reply with outcome status %v", pb.GetStatus())
	}
	return o, nil
}

func settleReportToPB(r netting.SettleReport) *econpb.SettleReport {
	pb := &econpb.SettleReport{
		SessionId: r.SessionID, Mode: r.Mode, Postings: int64(r.Postings), Netted: int64(r.Netted),
		JournalHead: r.JournalHead, AlreadySettled: r.AlreadySettled,
	}
	for _, rj := range r.Rejected {
		pb.Rejected = append(pb.Rejected, &econpb.Rejection{Key: rj.Key, Code: rj.Code})
	}
	return pb
}

func settleReportFromPB(pb *econpb.SettleReport) netting.SettleReport {
	r := netting.SettleReport{
		SessionID: pb.GetSessionId(), Mode: pb.GetMode(), Postings: int(pb.GetPostings()), Netted: int(pb.GetNetted()),
		JournalHead: pb.GetJournalHead(), AlreadySettled: pb.GetAlreadySettled(),
	}
	for _, rj := range pb.GetRejected() {
		r.Rejected = append(r.Rejected, netting.Rejection{Key: rj.GetKey(), Code: rj.GetCode()})
	}
	return r
}

func sweepToPB(s netting.SweepSummary) *econpb.SweepResponse {
	pb := &econpb.SweepResponse{Scanned: int64(s.Scanned)}
	for _, o := range s.Orphans {
		pb.Orphans = append(pb.Orphans, &econpb.Orphan{SessionId: o.SessionID, AgeMs: o.Age.Milliseconds()})
	}
	for _, o := range s.Settled {
		pb.Settled = append(pb.Settled, &econpb.SettledOrphan{SessionId: o.SessionID, Mode: o.Mode})
	}
	for _, f := range s.Failed {
		msg := ""
		if f.Err != nil {
			msg = f.Err.Error()
		}
		pb.Failed = append(pb.Failed, &econpb.FailedOrphan{SessionId: f.SessionID, Code: f.Code, Message: msg})
	}
	return pb
}

// sweepFromPB rebuilds a summary; a failed orphan's Err is a *RemoteError
// with its code and message.
func sweepFromPB(pb *econpb.SweepResponse) netting.SweepSummary {
	s := netting.SweepSummary{Scanned: int(pb.GetScanned())}
	for _, o := range pb.GetOrphans() {
		s.Orphans = append(s.Orphans, netting.Orphan{SessionID: o.GetSessionId(), Age: time.Duration(o.GetAgeMs()) * time.Millisecond})
	}
	for _, o := range pb.GetSettled() {
		s.Settled = append(s.Settled, netting.SettledOrphan{SessionID: o.GetSessionId(), Mode: o.GetMode()})
	}
	for _, f := range pb.GetFailed() {
		s.Failed = append(s.Failed, netting.FailedOrphan{
			SessionID: f.GetSessionId(), Code: f.GetCode(),
			Err: &RemoteError{Code: f.GetCode(), Message: f.GetMessage(), GRPC: codes.Internal},
		})
	}
	return s
}

// grpcCodeOf is the gRPC status code the service answers an error with. The
// class tells a client what to do: InvalidArgument is final; Unavailable,
// Aborted and Internal are worth a retry with the same movement key.
func grpcCodeOf(code string) codes.Code {
	switch code {
	case ledger.CodeMalformed, ledger.CodeUnbalanced, errcode.ConfigInvalid:
		return codes.InvalidArgument
	case CodeTooLarge:
		return codes.ResourceExhausted
	case CodeNotReady, CodeClosed, CodeLeaseLost, netting.CodeClosed:
		return codes.Unavailable
	case netting.CodeSettled, netting.CodeSettleClaimed, netting.CodeFenced,
		netting.CodeSeqConflict, netting.CodeKeyConflict:
		return codes.Aborted
	case netting.CodeSessionNotFound:
		return codes.NotFound
	case netting.CodeChainBroken:
		return codes.DataLoss
	default:
		return codes.Internal
	}
}

// StatusOf returns the gRPC status the service answers err with: the class
// from the code (grpcCodeOf), the message, and an ErrorInfo carrying the
// code and, for a *RequestError, the field. A context error becomes the
// matching status without ErrorInfo (the caller's own deadline or cancel).
func StatusOf(err error) *status.Status {
	if errcode.Of(err) == "" && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return status.FromContextError(err)
	}
	code := errcode.Of(err)
	if code == "" {
		code = CodeInternal
	}
	info := &errdetails.ErrorInfo{Reason: code, Domain: ErrorDomain}
	var rerr *RequestError
	if errors.As(err, &rerr) && rerr.Field != "" {
		info.Metadata = map[string]string{"field": rerr.Field}
	}
	st := status.New(grpcCodeOf(code), err.Error())
	if withInfo, derr := st.WithDetails(info); derr == nil {
		st = withInfo
	}
	return st
}

// RemoteError is an error as the service reported it: the stable code (empty
// when the status carried none: a transport failure, a deadline), the gRPC
// class, the message, the field at fault for a refused request, and the node
// that answered, when known. errors.Is matches any error with the same code
// (ErrNotReady, ledger.ErrMalformed, …); a status without a code matches
// context.DeadlineExceeded or context.Canceled by its class.
type RemoteError struct {
	Code    string
	GRPC    codes.Code
	Message string
	Field   string
	Node    string
}

func (e *RemoteError) Error() string {
	s := "econ: "
	if e.Node != "" {
		s += e.Node + ": "
	}
	if e.Code != "" {
		s += e.Code + ": "
	} else {
		s += e.GRPC.String() + ": "
	}
	return s + e.Message
}

// ErrorCode returns the code the service sent ("" if none).
func (e *RemoteError) ErrorCode() string { return e.Code }

// Is matches errors with the same code, and, for a status without one, the
// context error of its class.
func (e *RemoteError) Is(target error) bool {
	if e.Code == "" {
		switch e.GRPC {
		case codes.DeadlineExceeded:
			return target == context.DeadlineExceeded
		case codes.Canceled:
			return target == context.Canceled
		}
		return false
	}
	var c errcode.Coder
	if errors.As(target, &c) {
		return c.ErrorCode() == e.Code
	}
	return false
}

// errorFromStatus turns a gRPC call's error into a *RemoteError.
func errorFromStatus(err error, node string) *RemoteError {
	st := status.Convert(err)
	re := &RemoteError{GRPC: st.Code(), Message: st.Message(), Node: node}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			re.Code = info.GetReason()
			re.Field = info.GetMetadata()["field"]
			break
		}
	}
	return re
}
