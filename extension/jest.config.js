const path = require('path');

module.exports = {
  testEnvironment: 'jsdom',
  roots: ['<rootDir>/src'],
  setupFiles: ['<rootDir>/src/__tests__/jest-shim.js'],
  testRegex: 'src/__tests__/.*\\.spec\\.ts$',
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }]
  },
  moduleNameMapper: {
    '^argus-static/(.*)\\.css$': '<rootDir>/src/__tests__/style-mock.js',
    '^argus-static/(.*)$': path.resolve(__dirname, '..', 'argus_lab', 'static') + '/$1',
    '\\.css$': '<rootDir>/src/__tests__/style-mock.js',
    '^plotly\\.js-dist-min$': '<rootDir>/src/__tests__/style-mock.js'
  }
};
