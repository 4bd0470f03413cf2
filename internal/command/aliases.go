package command

import "github.com/alecthomas/kingpin/v2"

// OldSpelling registers a hidden flag under a retired name, to be bound to
// the same variable as the flag now spelled current: scripts written for the
// old spelling keep working, while --help and docs/cli.md show one spelling
// per flag across subcommands.
func OldSpelling(cmd *kingpin.CmdClause, old, current string) *kingpin.FlagClause {
	return cmd.Flag(old, "Old spelling of --"+current+".").Hidden()
}
