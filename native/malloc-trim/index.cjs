'use strict';
// The built addon; `npm install` builds it (node-gyp). keyrelay treats its absence as "no trim".
module.exports = require('./build/Release/malloc_trim.node');
