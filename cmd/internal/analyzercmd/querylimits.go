package analyzercmd

import (
	"fmt"
	"strconv"

	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
)

// QueryLimitFlags are the caps on what Prometheus' answers may hold while
// they are decoded (query.Limits), shared by every command that reads a
// Prometheus-compatible API.
type QueryLimitFlags struct {
	answerSeries, answerSamples, cycleSeries, cycleSamples int64
	answerBytes, cycleBytes                                units.Base2Bytes
}

// RegisterQueryLimitFlags adds the --query.answer.* and --query.cycle.*
// flags to cmd, with query's defaults.
func RegisterQueryLimitFlags(cmd *kingpin.CmdClause) *QueryLimitFlags {
	f := &QueryLimitFlags{}
	count := func(name, help string, def int64, v *int64) {
		cmd.Flag(name, help+" 0 lifts the cap.").Default(strconv.FormatInt(def, 10)).Int64Var(v)
	}
	size := func(name, help string, def int64, v *units.Base2Bytes) {
		cmd.Flag(name, help+" 0 lifts the cap.").Default(units.Base2Bytes(def).String()).BytesVar(v)
	}
	count(query.FlagAnswerSeries, "Most series one answer from Prometheus may hold (checked while it is decoded; the default fits 100,000 GPUs).", query.DefaultAnswerSeries, &f.answerSeries)
	count(query.FlagAnswerSamples, "Most samples one answer from Prometheus may hold.", query.DefaultAnswerSamples, &f.answerSamples)
	size(query.FlagAnswerBytes, "Most decoded bytes one answer from Prometheus may hold at once (a series folded as it arrives counts only until it is folded).", query.DefaultAnswerBytes, &f.answerBytes)
	count(query.FlagCycleSeries, "Most series the answers of one cycle (the queries run side by side for one analysis step, plan or report) may hold together.", query.DefaultCycleSeries, &f.cycleSeries)
	count(query.FlagCycleSamples, "Most samples the answers of one cycle may hold together.", query.DefaultCycleSamples, &f.cycleSamples)
	size(query.FlagCycleBytes, "Most decoded bytes the answers of one cycle may hold at once: bounds the memory a large or hostile Prometheus can take.", query.DefaultCycleBytes, &f.cycleBytes)
	return f
}

// Limits returns the caps the flags set, or a usage error naming the first
// negative one.
func (f *QueryLimitFlags) Limits() (query.Limits, error) {
	l := query.Limits{}
	for _, c := range []struct {
		flag string
		v    int64
		into *int64
	}{
		{query.FlagAnswerSeries, f.answerSeries, &l.AnswerSeries},
		{query.FlagAnswerSamples, f.answerSamples, &l.AnswerSamples},
		{query.FlagAnswerBytes, int64(f.answerBytes), &l.AnswerBytes},
		{query.FlagCycleSeries, f.cycleSeries, &l.CycleSeries},
		{query.FlagCycleSamples, f.cycleSamples, &l.CycleSamples},
		{query.FlagCycleBytes, int64(f.cycleBytes), &l.CycleBytes},
	} {
		switch {
		case c.v < 0:
			return l, &clikit.UsageError{Err: fmt.Errorf("--%s %d: want 0 (no cap) or more", c.flag, c.v)}
		case c.v == 0:
			*c.into = -1 // query.Limits lifts a negative cap
		default:
			*c.into = c.v
		}
	}
	return l, nil
}
