package link

import (
	"strconv"

	"github.com/shardwise/shardwise/proto/linkpb"
)

// Metadata keys exchanged when a stream opens.
const (
	// mdIncarnation (dialer → server): the sender's incarnation, a random
	// number fixed at AddPeer. Sequence numbers are per incarnation, so a
	// restarted node, or a peer removed and added again, starts again from
	// 1 without being taken for a replay.
	mdIncarnation = "link-incarnation"
	// mdResendFrom (dialer → server, control): the oldest seq the dialer can
	// still resend. Anything older that the server has not seen is lost.
	mdResendFrom = "link-resend-from"
	// mdLastSeq (server → dialer header, control): the last seq the server
	// accepted from this incarnation; the dialer resends what follows.
	mdLastSeq = "link-last-seq"
)

// parseUintMD reads the single decimal value of a metadata key. Absent is
// (0, nil): every key is optional for an old peer, and 0 means "none".
func parseUintMD(vals []string) (uint64, error) {
	switch len(vals) {
	case 0:
		return 0, nil
	case 1:
	default:
		return 0, ErrBadFrame.Wrap("metadata value repeated %d times", len(vals))
	}
	if len(vals[0]) == 0 || len(vals[0]) > 20 {
		return 0, ErrBadFrame.Wrap("metadata value %q", vals[0])
	}
	v, err := strconv.ParseUint(vals[0], 10, 64)
	if err != nil {
		return 0, ErrBadFrame.Wrap("metadata value %q", vals[0])
	}
	return v, nil
}

// validateInbound checks a control frame the dialing peer sent us: a
// request or a one-way message, numbered, within size.
func validateInbound(f *linkpb.ControlFrame, maxPayload int) error {
	if f.GetSeq() == 0 {
		return ErrBadFrame.Wrap("control frame without seq")
	}
	if len(f.GetPayload()) > maxPayload {
		return ErrBadFrame.Wrap("payload of %d bytes > %d", len(f.GetPayload()), maxPayload)
	}
	switch f.GetType() {
	case linkpb.ControlFrame_TYPE_REQUEST:
		if f.GetCallId() == 0 {
			return ErrBadFrame.Wrap("request without call id")
		}
	case linkpb.ControlFrame_TYPE_MESSAGE:
		if f.GetCallId() != 0 {
			return ErrBadFrame.Wrap("one-way message with call id %d", f.GetCallId())
		}
	default:
		return ErrBadFrame.Wrap("control frame of type %v from the dialer", f.GetType())
	}
	if f.GetErrorCode() != "" || f.GetErrorMessage() != "" || f.GetAck() != 0 {
		return ErrBadFrame.Wrap("reply fields on a %v", f.GetType())
	}
	return nil
}

// validateReply checks a frame the serving peer sent back on our control
// stream.
func validateReply(f *linkpb.ControlFrame, maxPayload int) error {
	if f.GetType() == linkpb.ControlFrame_TYPE_ACK {
		if f.GetAck() == 0 || f.GetCallId() != 0 || len(f.GetPayload()) != 0 {
			return ErrBadFrame.Wrap("malformed ack")
		}
		return nil
	}
	if f.GetType() != linkpb.ControlFrame_TYPE_REPLY {
		return ErrBadFrame.Wrap("frame of type %v from the server", f.GetType())
	}
	if f.GetCallId() == 0 {
		return ErrBadFrame.Wrap("reply without call id")
	}
	if len(f.GetPayload()) > maxPayload {
		return ErrBadFrame.Wrap("payload of %d bytes > %d", len(f.GetPayload()), maxPayload)
	}
	return nil
}

// validateBatch checks a replication batch.
func validateBatch(b *linkpb.ReplicationBatch) error {
	if b.GetSeq() == 0 {
		return ErrBadFrame.Wrap("replication batch without seq")
	}
	return nil
}
