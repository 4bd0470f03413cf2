// Package command is the one way every gpuwatch binary parses its command
// line, sets up logging, handles signals and chooses its exit code. Only
// cmd/ uses it.
package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/internal/buildinfo"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/secret"
	"github.com/gpuwatch/gpuwatch/internal/termsafe"
)

// Command is one subcommand: it adds itself and its flags to app and returns
// its name and the function that runs it. A binary without subcommands has
// one Command that adds its flags to app itself and returns the name "".
type Command func(app *kingpin.Application) (name string, run func(ctx context.Context) error)

// App is a binary's command line: its subcommands and the shared log flags.
type App struct {
	*kingpin.Application
	name   string
	stderr io.Writer
	logs   *clikit.LogFlags
	runs   map[string]func(ctx context.Context) error
}

// New builds the command line of the binary name with the given subcommands.
// Usage and errors go to stderr.
func New(name, help string, stderr io.Writer, commands ...Command) *App {
	// An argument starting with @ is a value ("@every 1h" is a schedule),
	// never a file of arguments to read.
	kingpin.EnableFileExpansion = false
	app := kingpin.New(name, help)
	app.Version(buildinfo.Print(name))
	app.HelpFlag.Short('h')
	app.UsageWriter(stderr)
	app.ErrorWriter(stderr)
	a := &App{Application: app, name: name, stderr: stderr, logs: clikit.RegisterLogFlags(app), runs: map[string]func(ctx context.Context) error{}}
	for _, c := range commands {
		n, fn := c(app)
		a.runs[n] = fn
	}
	return a
}

// Run parses args and runs the selected subcommand until it returns or the
// process is interrupted. It returns the exit code: 0 on success, 2 on bad
// flags or configuration (a clikit.UsageError), 1 on any other failure.
func (a *App) Run(args []string) int {
	selected, exit, err := a.parse(args)
	if len(args) == 0 && len(a.Model().Commands) > 0 {
		return 2 // kingpin printed the usage: a command is required
	}
	if exit >= 0 {
		return exit
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "%s: %v (see %s --help)\n", a.name, explainParseError(err, args), a.name)
		return 2
	}
	logger, err := a.logs.Logger()
	if err != nil {
		fmt.Fprintf(a.stderr, "%s: %v\n", a.name, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = WithLogger(ctx, logger)
	fn, ok := a.runs[selected]
	if !ok { // --help, --version, or `help COMMAND`
		return 0
	}
	if err := fn(ctx); err != nil {
		// The error may carry text from others (a Prometheus' error body,
		// a scheduler's message): no terminal escape and no credential
		// reaches the terminal.
		fmt.Fprintf(a.stderr, "%s: %s\n", strings.TrimSpace(a.name+" "+selected), termsafe.Lines(secret.String(err.Error())))
		var ue *clikit.UsageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// terminated is how parse stops kingpin after --help or --version.
type terminated int

// parse parses args. --help and --version end the program through
// kingpin's Terminate; parse stops parsing there and returns the exit code
// instead (exit is -1 otherwise), so that tests can call Run and the exit
// code is Run's.
func (a *App) parse(args []string) (selected string, exit int, err error) {
	a.Terminate(func(code int) { panic(terminated(code)) })
	defer func() {
		if r := recover(); r != nil {
			code, ok := r.(terminated)
			if !ok {
				panic(r)
			}
			exit = int(code)
		}
	}()
	selected, err = a.Parse(args)
	return selected, -1, err
}

// explainParseError names the flag whose value kingpin refused: its value
// errors ("time: invalid duration \"soon\"") do not say which flag they
// are about.
func explainParseError(err error, args []string) error {
	msg := err.Error()
	for i, a := range args {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, value, ok := strings.Cut(a, "=")
		if !ok && i+1 < len(args) {
			value = args[i+1]
		}
		if value != "" && (strings.Contains(msg, "'"+value+"'") || strings.Contains(msg, `"`+value+`"`)) {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return err
}
