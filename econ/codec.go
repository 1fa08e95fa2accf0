package econ

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	encproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/shardwise/shardwise/errcode"
)

// This file is the server's request decoding. gRPC's own proto codec
// refuses bytes that are not the message, and strings that are not UTF-8,
// before any handler runs, with a bare INTERNAL status; its receive limit
// refuses a large message with a bare RESOURCE_EXHAUSTED. Neither carries
// the ErrorInfo that marks the service's own answers, so a client following
// docs/protocol.md would take them for "outcome unknown" and retry for
// ever. requestCodec decodes instead, and when it cannot, hands the handler
// an empty message carrying the refusal (a decode mark), which every
// handler answers first: OP.MALFORMED naming the field, or OP.TOO_LARGE,
// and nothing reaches the node.
//
// Why a mark in the message and not an error: gRPC (v1.85) wraps any error
// of a codec's Unmarshal in a fresh INTERNAL status ("failed to unmarshal
// the received message"), dropping its details. And why not a table keyed
// by the message: a request an operator's interceptor refuses never
// reaches the handler, and its entry would stay behind.

// Request size limits of the server.
const (
	// MaxRequestBytes bounds one request message: above it the request is
	// answered OP.TOO_LARGE. A valid request is a few KiB at most.
	MaxRequestBytes = 4 << 20
	// MaxReceiveBytes is the gRPC server's own receive limit
	// (grpc.MaxRecvMsgSize, set by ServerOptions): a message above it is not
	// read at all, and gRPC answers RESOURCE_EXHAUSTED without an
	// ErrorInfo. It exists so that the server reads no unbounded message
	// into memory; between MaxRequestBytes and it, the service answers
	// OP.TOO_LARGE itself.
	MaxReceiveBytes = 16 << 20
)

// CodeTooLarge is the code of a request message over MaxRequestBytes.
const CodeTooLarge = "OP.TOO_LARGE"

// ErrTooLarge matches a request refused for its size (a *RequestError whose
// Err it is).
var ErrTooLarge = errcode.New(CodeTooLarge, "econ: request message too large")

// ServerOptions are the options the service needs on the grpc.Server it is
// registered on: its request codec (ForceServerCodecV2; it decodes only the
// economy service's messages leniently and every other message as gRPC's
// proto codec does) and the receive limit MaxReceiveBytes. Without them the
// service still works, but undecodable and too large requests are answered
// by gRPC without a code.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(requestCodec{}), grpc.MaxRecvMsgSize(MaxReceiveBytes)}
}

// econPackage is the proto package whose messages requestCodec marks.
const econPackage = "shardwise.econ.v1"

// markField is the field number of the decode mark in a message's unknown
// fields. Numbers 19000–19999 are reserved to protobuf implementations:
// protoc refuses them in a .proto file, so no field of econ.proto can ever
// take it. A client that sends it itself only gets its request refused.
const markField protowire.Number = 19999

// Fields of the mark (a nested message).
const (
	markCode   protowire.Number = 1
	markName   protowire.Number = 2
	markReason protowire.Number = 3
)

// requestCodec is gRPC's proto codec with lenient decoding of the economy
// service's messages (see the top of this file).
type requestCodec struct{}

var _ encoding.CodecV2 = requestCodec{}

func (requestCodec) Name() string { return encproto.Name }

func (requestCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2(encproto.Name).Marshal(v)
}

func (requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok || m.ProtoReflect().Descriptor().ParentFile().Package() != econPackage {
		return encoding.GetCodecV2(encproto.Name).Unmarshal(data, v)
	}
	if n := data.Len(); n > MaxRequestBytes {
		mark(m, &RequestError{Reason: fmt.Sprintf("the message is %d bytes, more than %d", n, MaxRequestBytes), Err: ErrTooLarge})
		return nil
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	if err := proto.Unmarshal(b, m); err != nil {
		mark(m, decodeError(m.ProtoReflect().Descriptor(), b, err))
	}
	return nil
}

// mark empties m and leaves rerr in it as its decode mark.
func mark(m proto.Message, rerr *RequestError) {
	proto.Reset(m)
	var inner []byte
	inner = protowire.AppendTag(inner, markCode, protowire.BytesType)
	inner = protowire.AppendString(inner, rerr.ErrorCode())
	inner = protowire.AppendTag(inner, markName, protowire.BytesType)
	inner = protowire.AppendString(inner, rerr.Field)
	inner = protowire.AppendTag(inner, markReason, protowire.BytesType)
	inner = protowire.AppendString(inner, rerr.Reason)
	b := protowire.AppendTag(nil, markField, protowire.BytesType)
	b = protowire.AppendBytes(b, inner)
	m.ProtoReflect().SetUnknown(b)
}

// decodeFailure returns the refusal requestCodec marked m with, or nil for
// a message that decoded. Every handler asks it first.
func decodeFailure(m proto.Message) error {
	b := m.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if num == markField && typ == protowire.BytesType {
			inner, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil
			}
			return markedError(inner)
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return nil
		}
		b = b[n:]
	}
	return nil
}

func markedError(b []byte) error {
	var code string
	rerr := &RequestError{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				break
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeString(b)
		if n < 0 {
			break
		}
		b = b[n:]
		switch num {
		case markCode:
			code = v
		case markName:
			rerr.Field = v
		case markReason:
			rerr.Reason = v
		}
	}
	if code == CodeTooLarge {
		rerr.Err = ErrTooLarge
	}
	if rerr.Reason == "" {
		rerr.Reason = "the request could not be decoded"
	}
	return rerr
}

// decodeError names what makes b not a message of md: the field whose
// bytes are wrong, as it is named on the wire ("legs[2].account"), and
// what is wrong at which byte offset. When it finds nothing more precise
// than the decoder did, the field is empty and the reason is the
// decoder's.
func decodeError(md protoreflect.MessageDescriptor, b []byte, err error) *RequestError {
	if field, reason, ok := locate(md, b, "", 0); ok {
		return &RequestError{Field: field, Reason: reason}
	}
	return &RequestError{Reason: "the bytes are not a " + string(md.FullName()) + ": " + err.Error()}
}

// locate walks b as a message of md and reports the first fault: a tag or
// a value that does not parse, a string field that is not UTF-8 (proto3
// strings must be). prefix names the message's place ("legs[2]."); base is
// b's offset in the whole message.
func locate(md protoreflect.MessageDescriptor, b []byte, prefix string, base int) (field, reason string, ok bool) {
	seen := map[protowire.Number]int{}
	whole := prefix
	if whole != "" {
		whole = whole[:len(whole)-1] // "legs[2]." names "legs[2]"
	}
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return whole, fmt.Sprintf("byte offset %d: not a field tag (%v)", base+off, protowire.ParseError(n)), true
		}
		fd := md.Fields().ByNumber(num)
		name := prefix + "field " + strconv.Itoa(int(num))
		if fd != nil {
			name = prefix + string(fd.Name())
			if fd.Cardinality() == protoreflect.Repeated {
				name += "[" + strconv.Itoa(seen[num]) + "]"
				seen[num]++
			}
		}
		valOff := off + n
		vn := protowire.ConsumeFieldValue(num, typ, b[valOff:])
		if vn < 0 {
			return name, fmt.Sprintf("byte offset %d: the value does not parse (%v)", base+valOff, protowire.ParseError(vn)), true
		}
		if fd != nil && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[valOff:])
			at := base + valOff + (vn - len(v))
			switch fd.Kind() {
			case protoreflect.StringKind:
				if !utf8.Valid(v) {
					return name, fmt.Sprintf("byte offset %d: not valid UTF-8", at+firstInvalidUTF8(v)), true
				}
			case protoreflect.MessageKind:
				if f, r, ok := locate(fd.Message(), v, name+".", at); ok {
					return f, r, true
				}
			}
		}
		off = valOff + vn
	}
	return "", "", false
}

// firstInvalidUTF8 is the index of the first byte of v that does not start
// a valid UTF-8 sequence.
func firstInvalidUTF8(v []byte) int {
	for i := 0; i < len(v); {
		r, size := utf8.DecodeRune(v[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(v)
}
