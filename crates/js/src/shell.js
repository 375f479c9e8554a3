// mongod's shell types, as the server's JavaScript sees BSON values (crates/js/src/convert.rs
// builds them from BSON and reads them back by their `__bsonType` tag). Evaluated once per
// thread's runtime, before any user code.
(function (g) {
  "use strict";
  function tag(ctor, name) {
    Object.defineProperty(ctor.prototype, "__bsonType", { value: name });
  }
  function hidden(obj, key, value) {
    Object.defineProperty(obj, key, { value: value, writable: true });
  }
  function ObjectId(str) {
    if (!(this instanceof ObjectId)) return new ObjectId(str);
    this.str = String(str);
  }
  ObjectId.prototype.toString = function () { return 'ObjectId("' + this.str + '")'; };
  ObjectId.prototype.valueOf = function () { return this.str; };
  ObjectId.prototype.equals = function (o) { return o instanceof ObjectId && o.str === this.str; };
  ObjectId.prototype.getTimestamp = function () {
    return new Date(parseInt(this.str.substr(0, 8), 16) * 1000);
  };
  tag(ObjectId, "ObjectId");

  function NumberLong(v) {
    if (!(this instanceof NumberLong)) return new NumberLong(v);
    hidden(this, "__s", v === undefined ? "0" : String(typeof v === "number" ? Math.trunc(v) : v));
    this.floatApprox = Number(this.__s);
  }
  NumberLong.prototype.valueOf = function () { return Number(this.__s); };
  NumberLong.prototype.toNumber = NumberLong.prototype.valueOf;
  NumberLong.prototype.toString = function () { return "NumberLong(" + this.__s + ")"; };
  tag(NumberLong, "NumberLong");

  function NumberInt(v) {
    if (!(this instanceof NumberInt)) return new NumberInt(v);
    hidden(this, "__v", Number(v) | 0);
  }
  NumberInt.prototype.valueOf = function () { return this.__v; };
  NumberInt.prototype.toNumber = NumberInt.prototype.valueOf;
  NumberInt.prototype.toString = function () { return "NumberInt(" + this.__v + ")"; };
  tag(NumberInt, "NumberInt");

  function NumberDecimal(v) {
    if (!(this instanceof NumberDecimal)) return new NumberDecimal(v);
    hidden(this, "__s", v === undefined ? "0" : String(v));
  }
  NumberDecimal.prototype.valueOf = function () { return Number(this.__s); };
  NumberDecimal.prototype.toString = function () { return 'NumberDecimal("' + this.__s + '")'; };
  tag(NumberDecimal, "NumberDecimal");

  function BinData(subtype, base64) {
    if (!(this instanceof BinData)) return new BinData(subtype, base64);
    hidden(this, "__t", subtype | 0);
    hidden(this, "__b64", String(base64));
  }
  BinData.prototype.subtype = function () { return this.__t; };
  BinData.prototype.base64 = function () { return this.__b64; };
  BinData.prototype.length = function () {
    var s = this.__b64, pad = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0;
    return (s.length / 4) * 3 - pad;
  };
  BinData.prototype.toString = function () {
    return "BinData(" + this.__t + ',"' + this.__b64 + '")';
  };
  tag(BinData, "BinData");

  function Timestamp(t, i) {
    if (!(this instanceof Timestamp)) return new Timestamp(t, i);
    this.t = t === undefined ? 0 : t;
    this.i = i === undefined ? 0 : i;
  }
  Timestamp.prototype.getTime = function () { return this.t; };
  Timestamp.prototype.getInc = function () { return this.i; };
  Timestamp.prototype.toString = function () { return "Timestamp(" + this.t + ", " + this.i + ")"; };
  tag(Timestamp, "Timestamp");

  function MinKey() { if (!(this instanceof MinKey)) return new MinKey(); }
  MinKey.prototype.toString = function () { return "MinKey"; };
  tag(MinKey, "MinKey");
  function MaxKey() { if (!(this instanceof MaxKey)) return new MaxKey(); }
  MaxKey.prototype.toString = function () { return "MaxKey"; };
  tag(MaxKey, "MaxKey");

  function Code(code, scope) {
    if (!(this instanceof Code)) return new Code(code, scope);
    this.code = String(code);
    if (scope !== undefined) this.scope = scope;
  }
  Code.prototype.toString = function () { return this.code; };
  tag(Code, "Code");

  function DBPointer(ns, id) {
    if (!(this instanceof DBPointer)) return new DBPointer(ns, id);
    this.ns = ns;
    this.id = id;
  }
  tag(DBPointer, "DBPointer");

  // A regular expression JavaScript's RegExp cannot hold (PCRE syntax, or an option such as
  // `x`): kept as pattern and options so it reaches BSON unchanged.
  function BSONRegExp(pattern, options) {
    if (!(this instanceof BSONRegExp)) return new BSONRegExp(pattern, options);
    this.pattern = pattern;
    this.options = options;
  }
  BSONRegExp.prototype.toString = function () { return "/" + this.pattern + "/" + this.options; };
  tag(BSONRegExp, "BSONRegExp");

  // A BSON regular expression as a RegExp when JavaScript can hold it; the BSON pattern and
  // options ride along, so a round trip gives back the same bytes.
  function regex(pattern, options) {
    if (/^[ims]*$/.test(options)) {
      try {
        var re = new RegExp(pattern, options);
        hidden(re, "__bsonPattern", pattern);
        hidden(re, "__bsonOptions", options);
        return re;
      } catch (e) { /* not JavaScript syntax */ }
    }
    return new BSONRegExp(pattern, options);
  }

  Array.sum = function (a) {
    var s = 0;
    for (var k = 0; k < a.length; k++) s += a[k];
    return s;
  };
  Array.avg = function (a) { return a.length ? Array.sum(a) / a.length : undefined; };
  Array.contains = function (a, x) { return a.indexOf(x) !== -1; };
  Array.unique = function (a) { return a.filter(function (x, k) { return a.indexOf(x) === k; }); };
  Array.shuffle = function (a) { return a.slice().sort(function () { return Math.random() - 0.5; }); };
  g.isNumber = function (x) { return typeof x === "number"; };
  g.isObject = function (x) { return typeof x === "object" && x !== null; };
  g.isString = function (x) { return typeof x === "string"; };
  g.tojson = function (x) { return JSON.stringify(x); };

  var shell = {
    ObjectId: ObjectId, NumberLong: NumberLong, NumberInt: NumberInt,
    NumberDecimal: NumberDecimal, BinData: BinData, Timestamp: Timestamp, MinKey: MinKey,
    MaxKey: MaxKey, Code: Code, DBPointer: DBPointer, BSONRegExp: BSONRegExp, regex: regex,
    Date: Date, RegExp: RegExp
  };
  Object.freeze(shell);
  Object.defineProperty(g, "__shell", { value: shell });
  var k;
  for (k in shell) {
    if (k !== "regex" && k !== "Date" && k !== "RegExp") g[k] = shell[k];
  }
  g.ISODate = function (s) { return s === undefined ? new Date() : new Date(s); };
  g.DBRef = function (ref, id, db) {
    var o = { $ref: ref, $id: id };
    if (db !== undefined) o.$db = db;
    return o;
  };
})(globalThis);
