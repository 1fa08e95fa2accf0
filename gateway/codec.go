package gateway

import (
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/proto/clientpb"
	"github.com/shardwise/shardwise/torus"
)

// maxTokenLen caps a login token's text (logintoken's are about 200
// bytes); a longer one is refused before it is parsed.
const maxTokenLen = 1024

// clientMsg is a decoded, checked client message: exactly one of its
// pointers is set.
type clientMsg struct {
	login  *clientpb.Login
	input  *Input
	ping   *clientpb.Ping
	logout bool
	resume *Credential
}

// decodeClient decodes and checks one client message. Every error matches
// ErrMalformed; nothing it is given can make it panic (FuzzDecodeClient).
func decodeClient(b []byte) (clientMsg, error) {
	var m clientpb.ClientMessage
	if err := proto.Unmarshal(b, &m); err != nil {
		return clientMsg{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch body := m.Body.(type) {
	case *clientpb.ClientMessage_Login:
		if body.Login == nil || body.Login.Token == "" {
			return clientMsg{}, fmt.Errorf("%w: login without a token", ErrMalformed)
		}
		if len(body.Login.Token) > maxTokenLen {
			return clientMsg{}, fmt.Errorf("%w: login token of %d bytes (at most %d)", ErrMalformed, len(body.Login.Token), maxTokenLen)
		}
		return clientMsg{login: body.Login}, nil
	case *clientpb.ClientMessage_Input:
		in := body.Input
		if in == nil {
			in = &clientpb.Input{}
		}
		out := Input{Seq: in.Seq, Entity: in.Entity, Kind: in.Kind, Target: in.Target}
		if pt := in.Point; pt != nil {
			out.Point, out.HasPoint = torus.Pos{X: pt.X, Y: pt.Y}, true
			if math.IsNaN(pt.X) || math.IsInf(pt.X, 0) || math.IsNaN(pt.Y) || math.IsInf(pt.Y, 0) {
				return clientMsg{}, fmt.Errorf("%w: input %d: point (%v, %v) is not finite", ErrMalformed, in.Seq, pt.X, pt.Y)
			}
		}
		return clientMsg{input: &out}, nil
	case *clientpb.ClientMessage_Ping:
		if body.Ping == nil {
			return clientMsg{ping: &clientpb.Ping{}}, nil
		}
		return clientMsg{ping: body.Ping}, nil
	case *clientpb.ClientMessage_Logout:
		return clientMsg{logout: true}, nil
	case *clientpb.ClientMessage_Resume:
		if body.Resume == nil || body.Resume.Credential == "" {
			return clientMsg{}, fmt.Errorf("%w: resume without a credential", ErrMalformed)
		}
		c, err := ParseCredential(body.Resume.Credential)
		if err != nil {
			return clientMsg{}, err
		}
		return clientMsg{resume: &c}, nil
	}
	return clientMsg{}, fmt.Errorf("%w: a message with no body", ErrMalformed)
}

// Field numbers of the hand-encoded batch (proto/client.proto).
const (
	fieldServerBatch = 3
	fieldBatchTick   = 1
	fieldBatchFrames = 2
)

// batchHeader appends what precedes the frames of a Batch of n frame
// bytes: the ServerMessage's batch field header, the tick, and the frames
// field header. The frames follow unchanged, so a batch is never
// re-encoded: its bytes are the simulating node's.
func batchHeader(dst []byte, tick uint64, n int) []byte {
	inner := protowire.SizeTag(fieldBatchFrames) + protowire.SizeBytes(n)
	if tick != 0 { // proto3 leaves a zero scalar out; so do we, to give protobuf's bytes exactly
		inner += protowire.SizeTag(fieldBatchTick) + protowire.SizeVarint(tick)
	}
	dst = protowire.AppendTag(dst, fieldServerBatch, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(inner))
	if tick != 0 {
		dst = protowire.AppendTag(dst, fieldBatchTick, protowire.VarintType)
		dst = protowire.AppendVarint(dst, tick)
	}
	dst = protowire.AppendTag(dst, fieldBatchFrames, protowire.BytesType)
	return protowire.AppendVarint(dst, uint64(n))
}

func marshalServer(dst []byte, m *clientpb.ServerMessage) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, m)
	if err != nil {
		panic(fmt.Sprintf("gateway: marshal %T: %v", m.Body, err)) // only invalid UTF-8 can fail, and no string here comes unchecked
	}
	return b
}

func appendYou(dst []byte, master, pet uint64) []byte {
	return marshalServer(dst, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_You{You: &clientpb.You{Master: master, Pet: pet}}})
}

func appendTerrain(dst []byte, chunk []byte) []byte {
	return marshalServer(dst, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_Terrain{Terrain: &clientpb.Terrain{Chunk: chunk}}})
}

func appendError(dst []byte, code, message string, seq uint32) []byte {
	code, message = strings.ToValidUTF8(code, "?"), strings.ToValidUTF8(message, "?")
	return marshalServer(dst, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_Error{Error: &clientpb.Error{Code: code, Message: message, InputSeq: seq}}})
}

func appendPong(dst []byte, nonce, tick uint64) []byte {
	return marshalServer(dst, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_Pong{Pong: &clientpb.Pong{Nonce: nonce, Tick: tick}}})
}

func appendResumeCredential(dst []byte, credential string, window time.Duration) []byte {
	return marshalServer(dst, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_ResumeCredential{
		ResumeCredential: &clientpb.ResumeCredential{Credential: credential, WindowMs: uint32(window.Milliseconds())}}})
}

func appendWelcome(dst []byte, w *clientpb.Welcome) []byte {
	return marshalServer(dst, &clientpb.ServerMessage{Body: &clientpb.ServerMessage_Welcome{Welcome: w}})
}
