package policy

import (
	"encoding/json"
	"testing"

	"github.com/agentvault/agentvault"
)

var amountCases = []struct {
	name, in, hint string
	want           Amount
	code           agentvault.Code // "" when it parses
}{
	{"eu grouping euro sign", "1.234,56 €", "", Amount{123456, "EUR"}, ""},
	{"us dollar", "$1,234.56", "", Amount{123456, "USD"}, ""},
	{"yen prefix", "JP¥1,234", "", Amount{1234, "JPY"}, ""},
	{"bare yen", "¥1,234", "", Amount{1234, "JPY"}, ""},
	{"yen hint cny", "¥12.50", "CNY", Amount{1250, "CNY"}, ""},
	{"zloty spaces", "1 234,56 zł", "", Amount{123456, "PLN"}, ""},
	{"zloty nbsp", "1\u00a0234,56\u00a0zł", "", Amount{123456, "PLN"}, ""},
	{"narrow nbsp", "1\u202f234,56 €", "", Amount{123456, "EUR"}, ""},
	{"thin space", "1\u2009234\u2009567,00 €", "", Amount{123456700, "EUR"}, ""},
	{"code prefix", "EUR 12.00", "", Amount{1200, "EUR"}, ""},
	{"code suffix comma", "12,00 EUR", "", Amount{1200, "EUR"}, ""},
	{"lower code", "12.00 usd", "", Amount{1200, "USD"}, ""},
	{"code glued", "EUR12", "", Amount{1200, "EUR"}, ""},
	{"pound", "£9.99", "", Amount{999, "GBP"}, ""},
	{"real", "R$ 1.299,90", "", Amount{129990, "BRL"}, ""},
	{"chf apostrophe", "CHF 1'234.50", "", Amount{123450, "CHF"}, ""},
	{"cad", "CA$19.99", "", Amount{1999, "CAD"}, ""},
	{"cad short", "C$19.99", "", Amount{1999, "CAD"}, ""},
	{"aud", "A$5", "", Amount{500, "AUD"}, ""},
	{"dollar with cad hint", "$5.00", "CAD", Amount{500, "CAD"}, ""},
	{"rupee indian grouping", "₹1,23,456.78", "", Amount{12345678, "INR"}, ""},
	{"hint only", "12.5", "EUR", Amount{1250, "EUR"}, ""},
	{"one decimal", "12,5 €", "", Amount{1250, "EUR"}, ""},
	{"eu thousands only", "1.234 €", "", Amount{123400, "EUR"}, ""},
	// A lone separator before three digits could be decimals or a group; the
	// larger reading is the one a spending limit can safely rest on.
	{"ambiguous reads larger", "$12.345", "", Amount{1234500, "USD"}, ""},
	{"three decimals bhd", "BHD 1.234", "", Amount{1234, "BHD"}, ""},
	{"label", "Total: $12.00", "", Amount{1200, "USD"}, ""},
	{"zero", "0,00 €", "", Amount{0, "EUR"}, ""},
	{"code and symbol", "12.00 € EUR", "", Amount{1200, "EUR"}, ""},
	{"won", "₩12,000", "", Amount{12000, "KRW"}, ""},

	{"negative sign", "-$5.00", "", Amount{}, agentvault.CodeAmountUnknown},
	{"negative unicode minus", "−5,00 €", "", Amount{}, agentvault.CodeAmountUnknown},
	{"negative suffix", "5.00- USD", "", Amount{}, agentvault.CodeAmountUnknown},
	{"bracketed", "($5.00)", "", Amount{}, agentvault.CodeAmountUnknown},
	{"garbage", "free shipping", "", Amount{}, agentvault.CodeAmountUnknown},
	{"empty", "", "EUR", Amount{}, agentvault.CodeAmountUnknown},
	{"no currency no hint", "12.00", "", Amount{}, agentvault.CodeAmountUnknown},
	{"unknown code", "12.00 XYZ", "", Amount{}, agentvault.CodeAmountUnknown},
	{"unknown hint", "12.00", "XYZ", Amount{}, agentvault.CodeAmountUnknown},
	{"two currencies", "$12.00 EUR", "", Amount{}, agentvault.CodeAmountUnknown},
	{"too many decimals", "$12.3456", "", Amount{}, agentvault.CodeAmountUnknown},
	{"yen decimals", "JP¥12.5", "", Amount{}, agentvault.CodeAmountUnknown},
	{"bad grouping", "$1,23.45", "", Amount{}, agentvault.CodeAmountUnknown},
	{"mixed groups", "1.234,567.89 €", "", Amount{}, agentvault.CodeAmountUnknown},
	{"two numbers", "$5 off $50", "", Amount{}, agentvault.CodeAmountUnknown},
	{"letters inside", "12a34 €", "", Amount{}, agentvault.CodeAmountUnknown},
	{"huge", "$9999999999999999999999", "", Amount{}, agentvault.CodeAmountUnknown},
	{"exponent", "1e5 USD", "", Amount{}, agentvault.CodeAmountUnknown},
}

func TestP18_ParseAmount(t *testing.T) {
	for _, tc := range amountCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAmount(tc.in, tc.hint)
			if tc.code != "" {
				if agentvault.ErrorCode(err) != tc.code {
					t.Fatalf("code = %q (err %v), want %q", agentvault.ErrorCode(err), err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			back, err := ParseAmount(got.String(), "")
			if err != nil || back != got {
				t.Fatalf("roundtrip of %q: %+v, %v", got.String(), back, err)
			}
		})
	}
}

func TestAmountString(t *testing.T) {
	for _, tc := range []struct {
		a    Amount
		want string
	}{
		{Amount{5, "EUR"}, "0.05 EUR"},
		{Amount{123456, "USD"}, "1234.56 USD"},
		{Amount{1234, "JPY"}, "1234 JPY"},
		{Amount{1, "BHD"}, "0.001 BHD"},
		{Amount{0, "EUR"}, "0.00 EUR"},
	} {
		if got := tc.a.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.a, got, tc.want)
		}
	}
}

func TestP18_RatesConvert(t *testing.T) {
	r, err := ParseRates(map[string]string{"EUR/USD": "1.08", "GBP/EUR": "27/23", "USD/JPY": "150"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		in   Amount
		to   string
		want Amount
		code agentvault.Code
	}{
		{"same currency", Amount{100, "EUR"}, "EUR", Amount{100, "EUR"}, ""},
		{"direct", Amount{10000, "EUR"}, "USD", Amount{10800, "USD"}, ""},
		{"inverse rounds up", Amount{100, "USD"}, "EUR", Amount{93, "EUR"}, ""}, // 0.9259.. -> 0.93
		{"fraction rate rounds up", Amount{2300, "GBP"}, "EUR", Amount{2700, "EUR"}, ""},
		{"fraction rate ceil", Amount{1, "GBP"}, "EUR", Amount{2, "EUR"}, ""},    // 0.0117.. -> 0.02
		{"to zero-decimal", Amount{1001, "USD"}, "JPY", Amount{1502, "JPY"}, ""}, // 1501.5 -> 1502
		{"from zero-decimal", Amount{150, "JPY"}, "USD", Amount{100, "USD"}, ""},
		{"no chaining", Amount{100, "GBP"}, "USD", Amount{}, agentvault.CodeAmountUnconvertible},
		{"no rate", Amount{100, "PLN"}, "EUR", Amount{}, agentvault.CodeAmountUnconvertible},
		{"unknown target", Amount{100, "EUR"}, "XYZ", Amount{}, agentvault.CodeAmountUnconvertible},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Convert(tc.in, tc.to)
			if tc.code != "" {
				if agentvault.ErrorCode(err) != tc.code {
					t.Fatalf("code %q, want %q", agentvault.ErrorCode(err), tc.code)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseRatesRefusesBadTables(t *testing.T) {
	for name, tab := range map[string]map[string]string{
		"no slash":      {"EURUSD": "1.08"},
		"same":          {"EUR/EUR": "1"},
		"unknown":       {"EUR/XYZ": "1"},
		"zero":          {"EUR/USD": "0"},
		"negative":      {"EUR/USD": "-1.08"},
		"float syntax":  {"EUR/USD": "1e3"},
		"garbage":       {"EUR/USD": "abc"},
		"inverse twice": {"EUR/USD": "1.08", "USD/EUR": "0.9"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseRates(tab); agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
				t.Fatalf("want invalid_input, got %v", err)
			}
		})
	}
}

func FuzzParseAmount(f *testing.F) {
	for _, tc := range amountCases {
		f.Add(tc.in, tc.hint)
	}
	f.Add("1.234.567,89 zł", "")
	f.Add("12.00", "JPY")
	f.Fuzz(func(t *testing.T, s, hint string) {
		a, err := ParseAmount(s, hint)
		if err != nil {
			if agentvault.ErrorCode(err) != agentvault.CodeAmountUnknown {
				t.Fatalf("error with code %q", agentvault.ErrorCode(err))
			}
			return
		}
		if a.Minor < 0 {
			t.Fatalf("negative amount parsed")
		}
		if _, ok := CurrencyExponent(a.Currency); !ok {
			t.Fatalf("unknown currency %q", a.Currency)
		}
		back, err := ParseAmount(a.String(), "")
		if err != nil || back != a {
			t.Fatalf("roundtrip %q -> %+v, %v", a.String(), back, err)
		}
	})
}

func FuzzAmountRoundtrip(f *testing.F) {
	f.Add(int64(123456), uint8(0))
	f.Add(int64(0), uint8(3))
	codes := []string{"USD", "EUR", "JPY", "BHD", "PLN", "KRW", "INR"}
	f.Fuzz(func(t *testing.T, minor int64, ci uint8) {
		if minor < 0 {
			minor = -(minor + 1)
		}
		minor %= 1_000_000_000_000_000 // 15 digits
		a := Amount{Minor: minor, Currency: codes[int(ci)%len(codes)]}
		back, err := ParseAmount(a.String(), "")
		if err != nil || back != a {
			t.Fatalf("parse(format(%+v)) = %+v, %v", a, back, err)
		}
		wire, err := ParseDecimal(a.Decimal(), a.Currency)
		if err != nil || wire != a {
			t.Fatalf("ParseDecimal(Decimal(%+v)) = %+v, %v", a, wire, err)
		}
	})
}

func TestParseDecimalAndJSON(t *testing.T) {
	for _, tc := range []struct {
		amount, cur string
		want        Amount
		ok          bool
	}{
		{"12.34", "EUR", Amount{1234, "EUR"}, true},
		{"12", "eur", Amount{1200, "EUR"}, true},
		{"12.3", "USD", Amount{1230, "USD"}, true},
		{"0", "JPY", Amount{0, "JPY"}, true},
		{"1234", "JPY", Amount{1234, "JPY"}, true},
		{"1.234", "BHD", Amount{1234, "BHD"}, true},
		{"1.234", "EUR", Amount{}, false},
		{"1,234.00", "USD", Amount{}, false},
		{"-1.00", "USD", Amount{}, false},
		{"+1.00", "USD", Amount{}, false},
		{"1.", "USD", Amount{}, false},
		{".5", "USD", Amount{}, false},
		{"1.5", "JPY", Amount{}, false},
		{"1e3", "USD", Amount{}, false},
		{"", "USD", Amount{}, false},
		{"12.00", "XYZ", Amount{}, false},
		{"99999999999999999999", "USD", Amount{}, false},
	} {
		got, err := ParseDecimal(tc.amount, tc.cur)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseDecimal(%q, %q) = %+v, %v", tc.amount, tc.cur, got, err)
		}
		if err != nil && agentvault.ErrorCode(err) != agentvault.CodeAmountUnknown {
			t.Errorf("code %q", agentvault.ErrorCode(err))
		}
	}
	a := Amount{123456, "EUR"}
	b, err := json.Marshal(a)
	if err != nil || string(b) != `{"amount":"1234.56","currency":"EUR"}` {
		t.Fatalf("marshal: %s, %v", b, err)
	}
	var back Amount
	if err := json.Unmarshal(b, &back); err != nil || back != a {
		t.Fatalf("unmarshal: %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"amount":"1.234","currency":"EUR"}`), &back); err == nil {
		t.Fatal("ambiguous wire amount accepted")
	}
}
