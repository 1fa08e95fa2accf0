package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"time"

	"github.com/shardwise/shardwise/clock"
)

//go:embed static
var static embed.FS

// contentTypes are the types the page's files are served with, fixed
// rather than taken from the host's MIME table (a browser refuses an ES
// module served as anything but JavaScript); as in package webclient.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// HandlerConfig configures Handler. Zero fields take the defaults
// documented on them.
type HandlerConfig struct {
	// Play, if set, returns the URL of a gateway's browser client
	// (package webclient, served by each gateway at http://ADDR/) with a
	// fresh login token, for the page's "play" view: GET /play redirects
	// to it. PlayURL builds one. nil: no play view (/play is not found).
	Play func(ctx context.Context) (url string, err error)
	// Every is how often the event stream sends a snapshot (when it
	// changed). Default 250ms.
	Every time.Duration
	// Clock times the event stream. Default clock.Real().
	Clock clock.Clock
	// Context, if set, ends every open stream when it is done: an
	// http.Server's Shutdown waits for its requests, and a stream lasts
	// as long as the browser keeps the page open, so cancel this first.
	// nil: a stream ends only with its request.
	Context context.Context
}

// Files returns the page's files (index.html, dashboard.js, map.js,
// dashboard.css), for a caller that serves or checks them itself.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // "static" is embedded: cannot happen
	}
	return sub
}

// Handler serves the dashboard of c: the page at / (its files beside
// it), the state as JSON at /snapshot.json, the state stream at /events
// (Server-Sent Events: one "snapshot" event with the JSON at once and
// again every Every while it changes), and, with cfg.Play, /play (a
// redirect to a fresh browser client). Each stream ends with its request,
// or when cfg.Context is done.
func Handler(c *Collector, cfg HandlerConfig) http.Handler {
	if cfg.Every <= 0 {
		cfg.Every = 250 * time.Millisecond
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	files := http.FileServerFS(Files())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /snapshot.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(c.withPlay(c.Snapshot(), cfg.Play != nil))
	})
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) { stream(w, r, c, cfg) })
	mux.HandleFunc("GET /play", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Play == nil {
			http.NotFound(w, r)
			return
		}
		u, err := cfg.Play(r.Context())
		if err != nil {
			http.Error(w, "no play URL: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, u, http.StatusFound)
	})
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "" || p[len(p)-1] == '/' {
			p += "index.html"
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", ct)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
	return mux
}

// page is what the page reads: the snapshot and whether /play exists.
type page struct {
	Snapshot
	Play bool `json:"play"`
}

func (c *Collector) withPlay(s Snapshot, play bool) page { return page{Snapshot: s, Play: play} }

// stream writes the snapshot as Server-Sent Events until the request
// ends: at once, then every cfg.Every when its version moved.
func stream(w http.ResponseWriter, r *http.Request, c *Collector, cfg HandlerConfig) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	t := cfg.Clock.NewTicker(cfg.Every)
	defer t.Stop()
	var stop <-chan struct{}
	if cfg.Context != nil {
		stop = cfg.Context.Done()
	}
	var sent uint64
	first := true
	for {
		s := c.Snapshot()
		if first || s.Version != sent {
			b, err := json.Marshal(c.withPlay(s, cfg.Play != nil))
			if err != nil {
				return
			}
			if _, err := w.Write(append(append([]byte("event: snapshot\ndata: "), b...), '\n', '\n')); err != nil {
				return
			}
			fl.Flush()
			sent, first = s.Version, false
		}
		select {
		case <-r.Context().Done():
			return
		case <-stop:
			return
		case <-t.C():
		}
	}
}

// PlayURL is the browser client at a gateway's HTTP address (host:port,
// or a full http:// or https:// URL) logged in with token: the token
// travels in the URL's fragment (#token=…), which the browser never sends
// to a server, and webclient's page reads it from there.
func PlayURL(gateway, token string) string {
	u, err := url.Parse(gateway)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		u = &url.URL{Scheme: "http", Host: gateway}
	}
	if u.Path == "" {
		u.Path = "/"
	}
	u.Fragment = "token=" + token
	return u.String()
}
