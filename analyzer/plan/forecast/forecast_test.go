package forecast

import (
	"errors"
	"math"
	"testing"
)

func TestMAPESkipsZeroActuals(t *testing.T) {
	if got := MAPE([]float64{0, 10, 20}, []float64{5, 11, 18}); math.Abs(got-0.1) > 1e-9 {
		t.Errorf("MAPE = %g, want 0.1 (zero actual left out)", got)
	}
	if !math.IsNaN(MAPE([]float64{0}, []float64{1})) {
		t.Error("MAPE of only zero actuals is undefined")
	}
}

// A clean seasonal series with a linear trend: Holt-Winters follows the
// trend, which seasonal naive cannot.
func TestHoltWintersFollowsTrend(t *testing.T) {
	const m = 24
	y := make([]float64, 6*m)
	for i := range y {
		y[i] = 50 + 0.2*float64(i) + 10*math.Sin(2*math.Pi*float64(i)/m)
	}
	bt, err := Evaluate(y, m, 3)
	if err != nil {
		t.Fatal(err)
	}
	if bt.Folds != 3 || bt.HoltWinters > 0.05 || bt.HoltWinters >= bt.Naive {
		t.Errorf("backtest %+v: want 3 folds, Holt-Winters under 5 %% and below seasonal naive", bt)
	}
	if _, err := Fit(y[:m], m); !errors.Is(err, ErrShort) {
		t.Errorf("one season: err %v, want ErrShort", err)
	}
	for _, x := range (&Model{Season: m, seasonal: make([]float64, m), level: -5}).Forecast(3) {
		if x < 0 {
			t.Error("a forecast of demand below zero")
		}
	}
}
