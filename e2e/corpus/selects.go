package corpus

import (
	"strconv"
	"strings"
)

// allCountries is a country list as address forms carry it.
var allCountries = strings.Split("Afghanistan|Åland Islands|Albania|Algeria|American Samoa|Andorra|Angola|Anguilla|Antarctica|Antigua and Barbuda|Argentina|Armenia|Aruba|Australia|Austria|Azerbaijan|Bahamas|Bahrain|Bangladesh|Barbados|Belarus|Belgium|Belize|Benin|Bermuda|Bhutan|Bolivia|Bonaire, Sint Eustatius and Saba|Bosnia and Herzegovina|Botswana|Bouvet Island|Brazil|British Indian Ocean Territory|Brunei Darussalam|Bulgaria|Burkina Faso|Burundi|Cabo Verde|Cambodia|Cameroon|Canada|Cayman Islands|Central African Republic|Chad|Chile|China|Christmas Island|Cocos (Keeling) Islands|Colombia|Comoros|Congo|Congo, Democratic Republic of the|Cook Islands|Costa Rica|Côte d'Ivoire|Croatia|Cuba|Curaçao|Cyprus|Czechia|Denmark|Djibouti|Dominica|Dominican Republic|Ecuador|Egypt|El Salvador|Equatorial Guinea|Eritrea|Estonia|Eswatini|Ethiopia|Falkland Islands (Malvinas)|Faroe Islands|Fiji|Finland|France|French Guiana|French Polynesia|French Southern Territories|Gabon|Gambia|Georgia|Germany|Ghana|Gibraltar|Greece|Greenland|Grenada|Guadeloupe|Guam|Guatemala|Guernsey|Guinea|Guinea-Bissau|Guyana|Haiti|Heard Island and McDonald Islands|Holy See|Honduras|Hong Kong|Hungary|Iceland|India|Indonesia|Iran|Iraq|Ireland|Isle of Man|Israel|Italy|Jamaica|Japan|Jersey|Jordan|Kazakhstan|Kenya|Kiribati|Korea, Democratic People's Republic of|Korea, Republic of|Kuwait|Kyrgyzstan|Lao People's Democratic Republic|Latvia|Lebanon|Lesotho|Liberia|Libya|Liechtenstein|Lithuania|Luxembourg|Macao|Madagascar|Malawi|Malaysia|Maldives|Mali|Malta|Marshall Islands|Martinique|Mauritania|Mauritius|Mayotte|Mexico|Micronesia|Moldova|Monaco|Mongolia|Montenegro|Montserrat|Morocco|Mozambique|Myanmar|Namibia|Nauru|Nepal|Netherlands|New Caledonia|New Zealand|Nicaragua|Niger|Nigeria|Niue|Norfolk Island|North Macedonia|Northern Mariana Islands|Norway|Oman|Pakistan|Palau|Palestine, State of|Panama|Papua New Guinea|Paraguay|Peru|Philippines|Pitcairn|Poland|Portugal|Puerto Rico|Qatar|Réunion|Romania|Russian Federation|Rwanda|Saint Barthélemy|Saint Helena, Ascension and Tristan da Cunha|Saint Kitts and Nevis|Saint Lucia|Saint Martin (French part)|Saint Pierre and Miquelon|Saint Vincent and the Grenadines|Samoa|San Marino|Sao Tome and Principe|Saudi Arabia|Senegal|Serbia|Seychelles|Sierra Leone|Singapore|Sint Maarten (Dutch part)|Slovakia|Slovenia|Solomon Islands|Somalia|South Africa|South Georgia and the South Sandwich Islands|South Sudan|Spain|Sri Lanka|Sudan|Suriname|Svalbard and Jan Mayen|Sweden|Switzerland|Syrian Arab Republic|Taiwan|Tajikistan|Tanzania|Thailand|Timor-Leste|Togo|Tokelau|Tonga|Trinidad and Tobago|Tunisia|Türkiye|Turkmenistan|Turks and Caicos Islands|Tuvalu|Uganda|Ukraine|United Arab Emirates|United Kingdom|United States|United States Minor Outlying Islands|Uruguay|Uzbekistan|Vanuatu|Venezuela|Viet Nam|Virgin Islands (British)|Virgin Islands (U.S.)|Wallis and Futuna|Western Sahara|Yemen|Zambia|Zimbabwe", "|")

var languages = strings.Split("Afrikaans|Albanian|Arabic|Armenian|Basque|Bengali|Bulgarian|Catalan|Chinese (Simplified)|Chinese (Traditional)|Croatian|Czech|Danish|Dutch|English|Estonian|Finnish|French|Galician|Georgian|German|Greek|Gujarati|Hebrew|Hindi|Hungarian|Icelandic|Indonesian|Irish|Italian|Japanese|Kannada|Kazakh|Korean|Latvian|Lithuanian|Macedonian|Malay|Maltese|Marathi|Norwegian|Persian|Polish|Portuguese|Punjabi|Romanian|Russian|Serbian|Slovak|Slovenian|Spanish|Swahili|Swedish|Tamil|Telugu|Thai|Turkish|Ukrainian|Urdu|Vietnamese|Welsh", "|")

// selectsPage is an account-details step with the selects that make
// checkout snapshots long: every country, states and provinces, a phone
// country code per country, birth years and languages (about 700 options).
func selectsPage() string {
	var b strings.Builder
	b.WriteString(siteHeader(false))
	b.WriteString(`<main style="padding:16px;max-width:720px"><h1>Your details</h1><p>We use these to deliver your order and to reach you about it.</p>`)
	b.WriteString(`<form id="details" method="post" action="/selects"><fieldset><legend>Name</legend><div class="row">` + textField("first", "first", "First name", "given-name") + textField("last", "last", "Last name", "family-name") + `</div></fieldset>`)
	b.WriteString(`<fieldset><legend>Address</legend>` + textField("line1", "line1", "Address line 1", "address-line1") + textField("line2", "line2", "Address line 2", "address-line2"))
	b.WriteString(`<div class="row">` + textField("city", "city", "City", "address-level2") + `<button type="button" id="locate" onclick="document.getElementById('locate-msg').textContent='Your location is not available'">Use my location</button><span id="locate-msg" role="status"></span></div>`)
	b.WriteString(`<label for="country">Country</label><select id="country" name="country" autocomplete="country-name"><option value="">Select a country</option>` + options(allCountries, "") + `</select>`)
	provinces := append(append([]string{}, usStates...), "American Samoa", "Guam", "Northern Mariana Islands", "Puerto Rico", "U.S. Virgin Islands", "Alberta", "British Columbia", "Manitoba", "New Brunswick", "Newfoundland and Labrador", "Nova Scotia", "Ontario", "Prince Edward Island", "Quebec", "Saskatchewan", "Northwest Territories", "Nunavut", "Yukon")
	b.WriteString(`<label for="region">State / Province</label><select id="region" name="region" autocomplete="address-level1"><option value="">Select a state or province</option>` + options(provinces, "") + `</select>`)
	b.WriteString(textField("postal", "postal", "Postal code", "postal-code") + `</fieldset>`)
	b.WriteString(`<fieldset><legend>Phone</legend><label for="dial">Country code</label><select id="dial" name="dial">`)
	r := rng(5)
	for _, c := range allCountries {
		b.WriteString(`<option>` + esc(c) + ` (+` + strconv.Itoa(1+r.intn(998)) + `)</option>`)
	}
	b.WriteString(`</select><label for="phone">Phone number</label><input type="tel" id="phone" name="phone" autocomplete="tel-national"></fieldset>`)
	b.WriteString(`<fieldset><legend>About you</legend><label for="year">Year of birth</label><select id="year" name="year"><option value="">Year</option>`)
	for y := 2010; y >= 1920; y-- {
		b.WriteString(`<option>` + strconv.Itoa(y) + `</option>`)
	}
	b.WriteString(`</select><label for="lang">Preferred language</label><select id="lang" name="lang">` + options(languages, "English") + `</select></fieldset>`)
	b.WriteString(`<div class="actions"><button type="submit" id="save">Save and continue</button> <a id="skip" href="/selects?skip=1">Skip this step</a></div></form></main>`)
	b.WriteString(siteFooter(false, ""))
	return doc("Your details – Northwind Outfitters", `.row{display:flex;gap:8px}fieldset{margin:10px 0}`, b.String())
}
