// Extra webpack settings merged by @jupyter/builder: the report renderer is bundled from its one copy in the
// Python package (argus_lab/static), shared with the exported HTML pages.
const path = require('path');

module.exports = {
  // plotly.js (4.4 MiB) is one lazily loaded chunk, fetched only when a report draws a figure
  performance: { hints: false },
  resolve: {
    alias: {
      'argus-static': path.resolve(__dirname, '..', 'argus_lab', 'static')
    }
  }
};
