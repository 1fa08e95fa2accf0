package gateway

import (
	"github.com/coder/websocket"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/gateway/clientinput"
)

// Error codes the gateway sends in clientpb.Error and as the reason of a
// close frame. They are part of the client protocol (docs/protocol.md).
const (
	CodeMalformed     = "GATEWAY.MALFORMED"      // bytes that are not one ClientMessage
	CodeLoginRequired = "GATEWAY.LOGIN_REQUIRED" // the first message was not a Login
	CodeOutOfOrder    = "GATEWAY.OUT_OF_ORDER"   // a second Login
	CodeLoginFailed   = "GATEWAY.LOGIN_FAILED"   // the token was refused (the reason names the token's code)
	CodeLoginTimeout  = "GATEWAY.LOGIN_TIMEOUT"  // no login within the login timeout
	CodeNotYours      = "GATEWAY.NOT_YOURS"      // an Input for an entity that is not the player's master or pet
	CodeBadInput      = clientinput.CodeBadInput // an Input the game refuses (unknown kind, missing point)
	CodeNotReady      = "GATEWAY.NOT_READY"      // an Input before the player's entities exist
	CodeRateLimited   = "GATEWAY.RATE_LIMITED"   // messages beyond the connection's rate were dropped
	CodeIdle          = "GATEWAY.IDLE"           // nothing received for the idle timeout
	CodeSlowReader    = "GATEWAY.SLOW_READER"    // the client did not read what it was sent
	CodeShutdown      = "GATEWAY.SHUTDOWN"       // the node is stopping
	CodeUnavailable   = "GATEWAY.UNAVAILABLE"    // the session directory or the world could not be reached
	CodeDisplaced     = "SESSION.DISPLACED"      // a newer login of the same account
	CodeExpired       = "SESSION.EXPIRED"        // the session's directory lease ran out
	CodeResumeRefused = "GATEWAY.RESUME_REFUSED" // a Resume whose credential the directory refused (used, superseded, unknown, expired)
	// CodeSubprotocol is the body of the HTTP 400 that answers an upgrade
	// offering subprotocols but not Subprotocol: it is never upgraded.
	CodeSubprotocol = "GATEWAY.SUBPROTOCOL"
)

// Sentinels for errors.Is, one per code a Go caller may meet.
var (
	ErrMalformed     = errcode.New(CodeMalformed, "gateway: malformed client message")
	ErrNotYours      = errcode.New(CodeNotYours, "gateway: not the player's own entity")
	ErrBadInput      = clientinput.ErrBadInput // the same sentinel: errors.Is matches either name
	ErrNotReady      = errcode.New(CodeNotReady, "gateway: the player's entities do not exist yet")
	ErrClosed        = errcode.New("GATEWAY.CLOSED", "gateway: closed")
	ErrUnavailable   = errcode.New(CodeUnavailable, "gateway: unavailable")
	ErrResumeRefused = errcode.New(CodeResumeRefused, "gateway: resume refused")
)

// WebSocket close status codes (the application range 4000–4999), one per
// reason the server closes a socket; the close reason is the matching code
// string. 1000 (normal) follows a Logout; 1009 (too big) a message over the
// frame limit. A slow reader is cut without a close frame (its window is
// shut): its client sees an abnormal closure (1006), and StatusSlowReader
// is what the server records.
const (
	StatusProtocol      websocket.StatusCode = 4000 // GATEWAY.MALFORMED, LOGIN_REQUIRED, OUT_OF_ORDER
	StatusLoginFailed   websocket.StatusCode = 4001
	StatusDisplaced     websocket.StatusCode = 4002
	StatusIdle          websocket.StatusCode = 4003
	StatusSlowReader    websocket.StatusCode = 4004
	StatusShutdown      websocket.StatusCode = 4005
	StatusUnavailable   websocket.StatusCode = 4006
	StatusExpired       websocket.StatusCode = 4007
	StatusResumeRefused websocket.StatusCode = 4008 // GATEWAY.RESUME_REFUSED: log in with a new token
)
