package link

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
)

// Config configures a Node. Zero values of optional fields are replaced by
// the defaults documented on each field, in one place: withDefaults.
type Config struct {
	// Certificate is this node's certificate and key, issued by the cluster
	// CA (see CA.Issue, LoadIdentity). The node's id is read from it.
	// Required.
	Certificate tls.Certificate
	// ClusterCA holds the CA that every peer's certificate must chain to.
	// Required.
	ClusterCA *x509.CertPool
	// Reload, if set, gives the certificate for every new connection, in
	// place of Certificate (which still names the node, and must name the
	// same node as every certificate Reload returns): a CertReloader's
	// Certificate method, so that a certificate rotated on disk is used
	// without a restart. Default nil: Certificate for every connection.
	Reload func() (*tls.Certificate, error)

	// ReplicationQueue is the number of batches waiting per peer before the
	// oldest is dropped. Default 1024, at most 1<<20.
	ReplicationQueue int
	// ControlQueue is the number of control frames waiting per peer before
	// Send and Call block, and also the most frames written but not yet
	// acknowledged (kept for resending after a reconnect). Default 1024,
	// at most 1<<20. The bound counts frames, not bytes: a peer may hold up
	// to 2·ControlQueue payloads (queued plus unacknowledged), so keep
	// control payloads small (bulk data belongs on replication).
	ControlQueue int
	// BackoffMin and BackoffMax bound the wait between connection attempts
	// (doubling, with equal jitter). Defaults 50ms and 5s.
	BackoffMin time.Duration
	BackoffMax time.Duration
	// AckTimeout is how long written control frames may stay
	// unacknowledged before the connection is presumed broken and made
	// again, which resends them. Measured on Clock. Default 2s.
	AckTimeout time.Duration
	// KeepaliveInterval is how often an idle connection is pinged; a ping
	// unanswered for another interval ends the connection, so a silent
	// partition (no FIN, no RST) is noticed even with nothing to send.
	// Default 10s, and at least 10s: gRPC raises anything less to 10s on
	// the client side. The server pings its dialers on the same interval.
	KeepaliveInterval time.Duration
	// ConnectTimeout bounds one connection attempt (TCP, TLS, opening both
	// streams). Default 5s.
	ConnectTimeout time.Duration
	// MaxFrameBytes bounds one control payload and one encoded replication
	// batch, both when sending (refused with ErrTooLarge) and receiving.
	// Every node of a cluster must use the same value. Default 4 MiB.
	MaxFrameBytes int
	// Seed seeds the backoff jitter. Default 0 is a valid seed.
	Seed uint64

	// Clock drives the reconnect backoff. Default clock.Real().
	Clock clock.Clock
	// Logger receives connection events. Default: discard.
	Logger *slog.Logger
	// Metrics receives the counters. Default: fresh, unregistered
	// collectors (read them with Node.Metrics()).
	Metrics *Metrics
	// Dial opens the TCP connection to a peer. Default net.Dialer. Tests
	// put a faulty.Network dialer here.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// StreamInterceptors wrap the outgoing streams (fault injection).
	StreamInterceptors []grpc.StreamClientInterceptor
}

// unparsable stands for a certificate's value in a configuration error when
// the certificate cannot be parsed (the DER bytes would say nothing).
type unparsable struct{}

func (unparsable) String() string { return "<unparsable>" }

// Validate reports the first field that is wrong, naming field and value.
func (c Config) Validate() error {
	if len(c.Certificate.Certificate) == 0 {
		return errcode.Config("Certificate", c.Certificate.Certificate, "a node certificate from the cluster CA is required")
	}
	if c.ClusterCA == nil {
		return errcode.Config("ClusterCA", c.ClusterCA, "the cluster CA pool is required")
	}
	// The replication queue is allocated in full per peer, and the control
	// bound is also the resend window: both must stay modest.
	if c.ReplicationQueue < 0 || c.ReplicationQueue > maxQueue {
		return errcode.Config("ReplicationQueue", c.ReplicationQueue, fmt.Sprintf("must be in [0, %d] (0 means the default)", maxQueue))
	}
	if c.ControlQueue < 0 || c.ControlQueue > maxQueue {
		return errcode.Config("ControlQueue", c.ControlQueue, fmt.Sprintf("must be in [0, %d] (0 means the default)", maxQueue))
	}
	if c.BackoffMin < 0 {
		return errcode.Config("BackoffMin", c.BackoffMin, "must be >= 0")
	}
	if c.BackoffMax < 0 {
		return errcode.Config("BackoffMax", c.BackoffMax, "must be >= 0")
	}
	if c.BackoffMin > 0 && c.BackoffMax > 0 && c.BackoffMax < c.BackoffMin {
		return errcode.Config("BackoffMax", c.BackoffMax, "must be >= BackoffMin")
	}
	if c.AckTimeout < 0 {
		return errcode.Config("AckTimeout", c.AckTimeout, "must be >= 0")
	}
	if c.KeepaliveInterval < 0 || c.KeepaliveInterval > 0 && c.KeepaliveInterval < minKeepalive {
		// gRPC would silently raise a shorter client interval to 10s.
		return errcode.Config("KeepaliveInterval", c.KeepaliveInterval, "must be 0 (default) or >= 10s, gRPC's client minimum")
	}
	if c.ConnectTimeout < 0 {
		return errcode.Config("ConnectTimeout", c.ConnectTimeout, "must be >= 0")
	}
	if c.MaxFrameBytes < 0 {
		return errcode.Config("MaxFrameBytes", c.MaxFrameBytes, "must be >= 0")
	}
	leaf, err := x509.ParseCertificate(c.Certificate.Certificate[0])
	if err != nil {
		return errcode.Config("Certificate", unparsable{}, err.Error())
	}
	if _, err := NodeIDFromCert(leaf); err != nil {
		return errcode.Config("Certificate", leaf.Subject.CommonName, err.Error())
	}
	return nil
}

const (
	maxQueue     = 1 << 20
	minKeepalive = 10 * time.Second
)

func (c Config) withDefaults() Config {
	if c.ReplicationQueue == 0 {
		c.ReplicationQueue = 1024
	}
	if c.ControlQueue == 0 {
		c.ControlQueue = 1024
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = 50 * time.Millisecond
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = 5 * time.Second
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = c.BackoffMin
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = 2 * time.Second
	}
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = 10 * time.Second
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 5 * time.Second
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = 4 << 20
	}
	c.Clock = clock.OrReal(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics()
	}
	if c.Dial == nil {
		var d net.Dialer
		c.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	return c
}

// backoffDelay is the wait before connection attempt number attempt+1
// after attempt failures: min·2^attempt capped at max, then "equal jitter"
// (half fixed, half random, r in [0,1)) so peers that lost the same node do
// not reconnect in lockstep yet never retry sooner than half the step.
func backoffDelay(attempt int, min, max time.Duration, r float64) time.Duration {
	d := min
	for i := 0; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	half := d / 2
	return half + time.Duration(r*float64(d-half))
}
