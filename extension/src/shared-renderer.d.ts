// Types of the one report renderer shared with the exported HTML pages (argus_lab/static/report-renderer.js,
// reached through the `argus-static` alias of webpack.config.js and jest.config.js).
declare module 'argus-static/report-renderer.js' {
  export interface IRenderOptions {
    Plotly?: unknown;
    maxRows?: number;
    document?: Document;
  }
  export interface IRendered {
    drill(path: string): void;
    destroy(): void;
  }
  export function render(el: HTMLElement, reportJson: unknown, options?: IRenderOptions): IRendered;
  export const version: string;
}

declare module 'plotly.js-dist-min';
