package clikit

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpuwatch/gpuwatch/internal/serve"
)

// Listeners are the TCP listeners of --web.listen-address, opened before a
// command says it started, so that a port in use or a bad address fails the
// start with one line naming the flag and the address.
type Listeners struct {
	ls    []net.Listener
	flags *web.FlagConfig
}

// Listen opens every --web.listen-address in flags that is a TCP address.
// With systemd socket activation or a vsock:// address it opens nothing, and
// Serve leaves the listening to serve.Serve, as before.
func Listen(flags *web.FlagConfig) (*Listeners, error) {
	l := &Listeners{flags: flags}
	if flags == nil || (flags.WebSystemdSocket != nil && *flags.WebSystemdSocket) || flags.WebListenAddresses == nil {
		return l, nil
	}
	for _, addr := range *flags.WebListenAddresses {
		if strings.HasPrefix(addr, "vsock://") {
			l.Close()
			return &Listeners{flags: flags}, nil
		}
	}
	for _, addr := range *flags.WebListenAddresses {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("--web.listen-address %s: %w", addr, listenCause(err))
		}
		l.ls = append(l.ls, ln)
	}
	return l, nil
}

func listenCause(err error) error {
	switch msg := err.Error(); {
	case strings.Contains(msg, "address already in use"):
		return fmt.Errorf("address already in use (another process listens there: stop it or choose another port)")
	case strings.Contains(msg, "permission denied"):
		return fmt.Errorf("permission denied (ports below 1024 need privileges: choose a higher port)")
	case strings.Contains(msg, "cannot assign requested address"):
		return fmt.Errorf("cannot assign requested address (no interface of this host has that IP)")
	}
	return err
}

// Addrs are the addresses the listeners are bound to (the port chosen for
// :0 included), for the log line that says the command started.
func (l *Listeners) Addrs() []string {
	if len(l.ls) == 0 && l.flags != nil && l.flags.WebListenAddresses != nil {
		return *l.flags.WebListenAddresses
	}
	var a []string
	for _, ln := range l.ls {
		a = append(a, ln.Addr().String())
	}
	return a
}

// Close closes the listeners that Serve has not taken.
func (l *Listeners) Close() {
	for _, ln := range l.ls {
		ln.Close()
	}
}

// Serve serves h on the opened listeners (TLS and basic auth from the web
// config, each listener bounded as serve.Serve bounds it) until ctx ends or
// one fails; with none opened it is serve.Serve.
func (l *Listeners) Serve(ctx context.Context, h http.Handler, logger *slog.Logger) error {
	if len(l.ls) == 0 {
		return serve.Serve(ctx, h, l.flags, logger)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(l.ls))
	for _, ln := range l.ls {
		go func() { errc <- serve.ServeListener(ctx, ln, h, l.flags, logger) }()
	}
	var first error
	for range l.ls {
		if err := <-errc; err != nil && first == nil {
			first = err
			cancel()
		} else if first == nil {
			cancel() // one ended with ctx: end the others too
		}
	}
	l.Close()
	return first
}
