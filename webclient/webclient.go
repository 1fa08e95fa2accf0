package webclient

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
)

//go:embed static
var static embed.FS

// contentTypes are the types Handler serves each extension with. They are
// fixed here rather than taken from package mime, whose table a machine's
// /etc/mime.types can change: a browser refuses an ES module served with a
// type that is not JavaScript's, so the type must not depend on the host.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// Files returns the client's files (index.html, play.js, view.js,
// client.js, proto.js, frames.js), for a caller that serves or checks them itself.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // "static" is a valid path and is embedded: cannot happen
	}
	return sub
}

// Handler serves the client's files at the root of its path ("/" is
// index.html); mount it under a prefix with http.StripPrefix. Every file
// is served with a fixed content type (JavaScript as text/javascript, so
// browsers load the ES modules), nosniff, and no-cache so that a page
// never runs modules of two versions. A path with an extension Handler
// does not serve is not found.
func Handler() http.Handler {
	files := http.FileServerFS(Files())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
}
