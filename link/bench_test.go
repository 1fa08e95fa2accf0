package link_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/proto/linkpb"
)

const (
	benchEntriesPerBatch = 16
	benchPayloadBytes    = 24 // a position + velocity, roughly
	benchInFlight        = 1024
)

func benchBatch() []link.Entry {
	entries := make([]link.Entry, benchEntriesPerBatch)
	for i := range entries {
		entries[i] = link.Entry{Entity: uint64(1_000_000 + i), Epoch: 3, Sequence: uint64(5000 + i), Kind: 2, Payload: make([]byte, benchPayloadBytes)}
	}
	return entries
}

// BenchmarkReplicationBatches: one op is one batch of 16 small entries
// sent a→b and delivered to b's handler, with at most benchInFlight batches
// outstanding so the queue never drops (this measures sustained delivery).
func BenchmarkReplicationBatches(b *testing.B) {
	c := newCluster(b, clusterOpts{tweak: func(cfg *link.Config) { cfg.ReplicationQueue = 2 * benchInFlight }}, "a", "b")
	delivered := make(chan struct{}, benchInFlight)
	c.nodes["b"].OnReplication(func(string, uint64, []link.Entry) { delivered <- struct{}{} })
	c.waitConnected("a", "b")
	entries := benchBatch()
	pb := &linkpb.ReplicationBatch{Seq: 1 << 20}
	for _, e := range entries {
		pb.Entries = append(pb.Entries, &linkpb.ReplicationEntry{Entity: e.Entity, Epoch: e.Epoch, Sequence: e.Sequence, Kind: e.Kind, Payload: e.Payload})
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	inFlight := 0
	for range b.N {
		if inFlight == benchInFlight {
			<-delivered
			inFlight--
		}
		if err := c.nodes["a"].Replicate("b", entries); err != nil {
			b.Fatal(err)
		}
		inFlight++
	}
	for ; inFlight > 0; inFlight-- {
		<-delivered
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "batches/s")
	b.ReportMetric(float64(b.N*benchEntriesPerBatch)/el.Seconds(), "entries/s")
	b.ReportMetric(float64(proto.Size(pb)), "wire-bytes/batch")
	if d := c.nodes["a"].Metrics().Dropped("b", link.StreamReplication, link.DropQueueFull); d != 0 {
		b.Fatalf("%v batches dropped", d)
	}
}

// BenchmarkControlRoundTrip: one op is one Call with a 16-byte payload
// echoed back, sequentially.
func BenchmarkControlRoundTrip(b *testing.B) {
	c := newCluster(b, clusterOpts{}, "a", "b")
	c.nodes["b"].Handle(kindEcho, func(_ context.Context, _ string, p []byte) ([]byte, error) { return p, nil })
	c.waitConnected("a", "b")
	ctx := context.Background()
	payload := make([]byte, 16)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := c.nodes["a"].Call(ctx, "b", kindEcho, payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBaselineGRPCUnary: the same mutual TLS on loopback, one plain
// gRPC unary call per op (the health check), for the ratio.
func BenchmarkBaselineGRPCUnary(b *testing.B) {
	ca := newCA(b)
	srvCfg, cliCfg := nodeConfig(b, ca, "b"), nodeConfig(b, ca, "a")
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS((&tlsServer{srvCfg}).cfg())))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	defer func() { srv.Stop(); <-done }()
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(tlsClient(cliCfg))))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	ctx := context.Background()
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBaselineTCPEcho: 16 bytes echoed over a raw loopback TCP
// connection, the floor any round trip pays.
func BenchmarkBaselineTCPEcho(b *testing.B) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer lis.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := lis.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 16)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	c.Close()
	<-done
}
