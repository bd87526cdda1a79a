// Package catalogue serves the partner subcategory listing, version 2 of the
// partner API:
//
//	GET /api/public/v2/subcategories?cityCode=PARIS&languageCode=FR
//	Partner-Auth: <partner key>
//
// answers {"subCategories": [{id, name, categoryId, canonicalUrl,
// localeSpecificUrls}]} for one city, with names in the requested language.
//
// # Decisions where the spec says "not shown"
//
// Errors use the product's body, {"error": <name>, "message": <text>}
// (internal/jsonhttp). Checks run in this order, the first failure answers:
//
//	unknown path                              404 NotFound
//	method other than GET or HEAD             405 MethodNotAllowed (Allow: GET, HEAD)
//	Partner-Auth missing or blank             401 Unauthorized
//	Partner-Auth not a partner key, or twice  401 Unauthorized
//	malformed query string                    400 InvalidQuery
//	cityCode or languageCode given twice      400 InvalidQuery
//	cityCode missing or empty                 400 MissingCityCode
//	languageCode not one of EN ES FR IT DE PT NL  400 UnsupportedLanguage
//	cityCode not in the catalogue             404 CityNotFound
//
// Every 401 carries WWW-Authenticate: Partner-Auth realm="partner API v2".
//
// A city that is in the catalogue but has no subcategories answers 200 with
// an empty list: 404 means "no such city" (most often a typo), an empty list
// means "nothing to sell there yet".
//
// Codes are case-insensitive: languageCode=fr and cityCode=paris are read as
// FR and PARIS (codes in the data are upper-case). An empty languageCode is
// the default, EN. Other query parameters are ignored.
//
// name is the subcategory's name in the requested language, or its EN name
// when the catalogue has none in that language. localeSpecificUrls maps each
// language that has a path to that path (a URL path, not a URL).
// canonicalUrl is the base URL (--base-url) joined to the path of the
// requested language (EN's when that language has none): the page of this
// subcategory a partner should link to for its readers.
//
// Subcategories are listed in the order of the catalogue file.
//
// Every 200 carries a strong ETag (a hash of the body) and Cache-Control
// "private, no-cache"; a request whose If-None-Match names it (weak
// comparison) or is "*" gets 304 with no body. Errors carry no ETag.
//
// # Partner keys
//
// Keys are kept only as SHA-256 hashes ("sha256:" and 64 hex digits, made by
// `turnledger catalogue hash-key`). A presented key is hashed and compared
// with every stored hash in constant time. A key file holds one hash per
// line, optionally followed by a label; # starts a comment line. A line that
// is not a hash (a plain key pasted by mistake) stops the server with its
// line number.
//
// # The catalogue file
//
// JSON, one object with three arrays, in this order:
//
//	{
//	  "cities":        [{"code": "PARIS", "names": {"EN": "Paris", "FR": "Paris", ...}}],
//	  "categories":    [{"id": "1", "names": {"EN": "Tickets", ...}}],
//	  "subcategories": [{"id": "20001", "cityCode": "PARIS", "categoryId": "1",
//	                     "names": {"EN": "Museums", "FR": "Musées", ...},
//	                     "paths": {"EN": "/paris/museums-sc-20001/", "FR": "/fr/paris/musees-sc-20001/", ...}}]
//	}
//
// City codes are upper-case letters, digits and _; ids are 1 to 64 letters,
// digits, - or _; ids and codes are unique; every subcategory's cityCode and
// categoryId must be defined above it; names and paths need EN and accept
// only the seven language codes; a path starts with / and has no host, query
// or blanks; unknown fields are errors. Any problem stops the server with
// the line of the record at fault. `turnledger catalogue sample` prints the
// embedded sample, a template to start from.
package catalogue
