// Package serve runs every gpuwatch HTTP listener the same way: the
// listeners exporter-toolkit's flags ask for (addresses, vsock, systemd
// socket activation), its web config for TLS and basic auth, and timeouts
// and a connection cap on each, so no listener is left unbounded.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/mdlayher/vsock"
	"github.com/prometheus/exporter-toolkit/web"
)

// Limits bound what clients can hold of a listener: a slow or idle client
// is cut off by the timeouts, and past MaxConnections a listener accepts no
// more until one closes (the kernel queues the rest), so a flood of slow
// connections cannot exhaust file descriptors or memory. At the cap, the
// connection that has sent no request for longest is closed to make room,
// then the one idle longest between keep-alive requests, so neither silent
// nor idle clients lock a scrape out.
type Limits struct {
	ReadHeaderTimeout time.Duration // request line and headers
	ReadTimeout       time.Duration // the whole request, body included
	WriteTimeout      time.Duration // from the end of the headers to the end of the response
	IdleTimeout       time.Duration // a keep-alive connection between requests
	MaxConnections    int           // open connections per listener
}

// silentGraceDivisor: a connection that has sent nothing for a tenth of
// the header timeout is taken for silent when room is needed; a real
// client's request follows its connect within milliseconds.
const silentGraceDivisor = 10

// DefaultLimits serve every gpuwatch listener. A scrape of a large node is
// written in well under a second; 512 connections is Prometheus' own
// default for --web.max-connections.
var DefaultLimits = Limits{
	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       30 * time.Second,
	WriteTimeout:      60 * time.Second,
	IdleTimeout:       60 * time.Second,
	MaxConnections:    512,
}

// Serve runs the HTTP server with exporter-toolkit's flags (listen addresses,
// systemd socket activation, web config for TLS and basic auth) until ctx
// ends, every listener bounded by DefaultLimits.
func Serve(ctx context.Context, h http.Handler, flags *web.FlagConfig, logger *slog.Logger) error {
	ls, err := listen(flags, logger)
	if err != nil {
		return err
	}
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	return serveLimited(ctx, ls, h, flags, logger, DefaultLimits)
}

// ServeListener is Serve on a listener the caller opened (tests, the demo):
// TLS and basic auth still come from the web config in flags.
func ServeListener(ctx context.Context, l net.Listener, h http.Handler, flags *web.FlagConfig, logger *slog.Logger) error {
	return serveLimited(ctx, []net.Listener{l}, h, flags, logger, DefaultLimits)
}

func serveLimited(ctx context.Context, ls []net.Listener, h http.Handler, flags *web.FlagConfig, logger *slog.Logger, lim Limits) error {
	limited := make([]net.Listener, len(ls))
	for i, l := range ls {
		limited[i] = newCapListener(l, lim.MaxConnections, lim.ReadHeaderTimeout/silentGraceDivisor)
	}
	return serve(ctx, h, logger, lim, func(srv *http.Server) error { return web.ServeMultiple(limited, srv, flags, logger) })
}

// listen opens the listeners exporter-toolkit's ListenAndServe would: the
// systemd-activated ones, or one per --web.listen-address (TCP or vsock://).
// They are opened here so that each can be bounded.
func listen(flags *web.FlagConfig, logger *slog.Logger) ([]net.Listener, error) {
	if flags.WebSystemdSocket != nil && *flags.WebSystemdSocket {
		logger.Info("Listening on systemd activated listeners instead of port listeners.")
		ls, err := activation.Listeners()
		if err != nil {
			return nil, err
		}
		if len(ls) == 0 {
			return nil, errors.New("no socket activation file descriptors found")
		}
		return ls, nil
	}
	if flags.WebListenAddresses == nil || len(*flags.WebListenAddresses) == 0 {
		return nil, errors.New("no --web.listen-address given")
	}
	var ls []net.Listener
	for _, addr := range *flags.WebListenAddresses {
		var l net.Listener
		var err error
		if rest, ok := strings.CutPrefix(addr, "vsock://"); ok {
			var port uint64
			if _, p, perr := net.SplitHostPort(rest); perr != nil {
				err = perr
			} else if port, err = strconv.ParseUint(p, 10, 32); err == nil {
				l, err = vsock.Listen(uint32(port), nil)
			}
		} else {
			l, err = net.Listen("tcp", addr)
		}
		if err != nil {
			for _, o := range ls {
				o.Close()
			}
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		ls = append(ls, l)
	}
	return ls, nil
}

func serve(ctx context.Context, h http.Handler, logger *slog.Logger, lim Limits, run func(*http.Server) error) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: lim.ReadHeaderTimeout, ReadTimeout: lim.ReadTimeout,
		WriteTimeout: lim.WriteTimeout, IdleTimeout: lim.IdleTimeout, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn), ConnState: connState}
	errc := make(chan error, 1)
	go func() { errc <- run(srv) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
