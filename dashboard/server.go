package dashboard

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/nodehttp"
)

// Server serves Handler over HTTP on its own listener, for a process that
// runs nodes and has an address for their page (a zone node's
// --dashboard, the demo's). Close stops it.
type Server struct {
	lis    net.Listener
	srv    *http.Server
	cancel context.CancelFunc
	served chan struct{}
	once   sync.Once
}

// Listen serves c's dashboard at addr (port 0: any free port) until
// Close. field names addr in an error (the flag or key the user wrote).
// cfg.Context is set by Listen: Close ends the open streams first.
func Listen(field, addr string, c *Collector, cfg HandlerConfig, log *slog.Logger) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errcode.Config(field, addr, err.Error())
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Context = ctx
	s := &Server{
		lis: lis,
		// Read -1: /events streams for as long as the page is open, and
		// the server would cancel it at its read deadline; the handlers
		// read no body, and the headers are bounded all the same.
		srv:    nodehttp.NewServer(Handler(c, cfg), nodehttp.Timeouts{Read: -1}),
		cancel: cancel,
		served: make(chan struct{}),
	}
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("dashboard: server", "addr", lis.Addr().String(), "err", err)
		}
	}()
	return s, nil
}

// Addr is the address the page is served at.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Close ends the open streams, shuts the server down (5 s at most for the
// requests in flight) and waits for it. It is idempotent.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		s.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err = s.srv.Shutdown(ctx); err != nil {
			_ = s.srv.Close()
		}
		<-s.served
	})
	return err
}
