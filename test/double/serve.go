package double

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// ServeUntilSignal serves h on ln, as the doubles' commands run in a pod, until
// SIGINT or SIGTERM: then release runs first (a double lets its held requests go
// unanswered), and the server shuts down within a second. It returns what ended
// serving other than that shutdown.
func ServeUntilSignal(ln net.Listener, h http.Handler, release func()) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		release()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
