// Package forecast predicts hourly demand a season ahead with additive
// Holt-Winters (level, trend and a seasonal term; weekly seasons of 168
// hours for GPU demand), its parameters chosen by the least one-step error
// on the history, and measures it by backtest against seasonal naive (next
// week = this week), the baseline a forecast must beat to be worth showing.
package forecast

import (
	"errors"
	"math"
)

// Model is a fitted Holt-Winters model.
type Model struct {
	Alpha, Beta, Gamma float64
	Season             int
	level, trend       float64
	seasonal           []float64 // indexed by position in the season of the next point
	n                  int       // points fitted
}

// ErrShort is returned when the history holds fewer than two seasons.
var ErrShort = errors.New("forecast: history shorter than two seasons")

var grid = []float64{0.05, 0.1, 0.2, 0.35, 0.5, 0.7}

// Fit fits additive Holt-Winters with the given season length to y,
// searching α, β, γ on a grid for the least sum of squared one-step errors.
func Fit(y []float64, season int) (*Model, error) {
	if season < 1 || len(y) < 2*season {
		return nil, ErrShort
	}
	var best *Model
	bestSSE := math.Inf(1)
	for _, a := range grid {
		for _, b := range []float64{0, 0.01, 0.05, 0.1} {
			for _, g := range grid {
				m, sse := run(y, season, a, b, g)
				if sse < bestSSE {
					best, bestSSE = m, sse
				}
			}
		}
	}
	return best, nil
}

// run filters y with fixed parameters and returns the model after the last
// point and the one-step squared error after the first season.
func run(y []float64, m int, a, b, g float64) (*Model, float64) {
	// Initial level: the first season's mean; trend: the mean change
	// between the first two seasons per step; seasonal: deviations from
	// the first season's mean.
	var s1, s2 float64
	for i := 0; i < m; i++ {
		s1 += y[i]
		s2 += y[m+i]
	}
	level := s1 / float64(m)
	trend := (s2 - s1) / float64(m*m)
	seasonal := make([]float64, m)
	for i := 0; i < m; i++ {
		seasonal[i] = y[i] - level
	}
	var sse float64
	for t := m; t < len(y); t++ {
		si := t % m
		pred := level + trend + seasonal[si]
		e := y[t] - pred
		sse += e * e
		prevLevel := level
		level = a*(y[t]-seasonal[si]) + (1-a)*(level+trend)
		trend = b*(level-prevLevel) + (1-b)*trend
		seasonal[si] = g*(y[t]-level) + (1-g)*seasonal[si]
	}
	return &Model{Alpha: a, Beta: b, Gamma: g, Season: m, level: level, trend: trend, seasonal: seasonal, n: len(y)}, sse
}

// Forecast returns the next h points, never below zero (demand is a count).
func (m *Model) Forecast(h int) []float64 {
	out := make([]float64, h)
	for k := 1; k <= h; k++ {
		si := (m.n + k - 1) % m.Season
		out[k-1] = math.Max(0, m.level+float64(k)*m.trend+m.seasonal[si])
	}
	return out
}

// SeasonalNaive repeats the last season.
func SeasonalNaive(y []float64, season, h int) []float64 {
	out := make([]float64, h)
	for k := range out {
		out[k] = y[len(y)-season+k%season]
	}
	return out
}

// MAPE is the mean absolute percentage error of pred against actual over
// the points where actual is not zero (a percentage of nothing is
// undefined); NaN when there are none.
func MAPE(actual, pred []float64) float64 {
	var sum float64
	n := 0
	for i := range actual {
		if i >= len(pred) || actual[i] == 0 {
			continue
		}
		sum += math.Abs(actual[i]-pred[i]) / math.Abs(actual[i])
		n++
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// Backtest is the error of both methods over the last seasons of a history.
type Backtest struct {
	// Folds is the number of seasons forecast (each from the history
	// before it).
	Folds int `json:"folds"`
	// HoltWinters and Naive are the mean MAPE (0-1) over the folds.
	HoltWinters float64 `json:"holt_winters_mape"`
	Naive       float64 `json:"seasonal_naive_mape"`
}

// Evaluate forecasts each of the last folds seasons of y from the history
// before it, with both methods, and averages their MAPE. Holt-Winters needs
// two seasons of history, so folds is cut to len(y)/season - 2.
func Evaluate(y []float64, season, folds int) (Backtest, error) {
	folds = min(folds, len(y)/season-2)
	if folds < 1 {
		return Backtest{}, ErrShort
	}
	var bt Backtest
	end := len(y) - len(y)%season
	for f := folds; f >= 1; f-- {
		cut := end - f*season
		hist, actual := y[:cut], y[cut:cut+season]
		m, err := Fit(hist, season)
		if err != nil {
			return Backtest{}, err
		}
		hw := MAPE(actual, m.Forecast(season))
		nv := MAPE(actual, SeasonalNaive(hist, season, season))
		if math.IsNaN(hw) || math.IsNaN(nv) {
			continue
		}
		bt.HoltWinters += hw
		bt.Naive += nv
		bt.Folds++
	}
	if bt.Folds == 0 {
		return Backtest{}, errors.New("forecast: no demand in the backtest seasons")
	}
	bt.HoltWinters /= float64(bt.Folds)
	bt.Naive /= float64(bt.Folds)
	return bt, nil
}
