/**
 * The MIME renderer for `application/vnd.argus.report+json` (safe: it runs in untrusted notebooks, because the
 * shared renderer builds every node with textContent and never evaluates code from the output).
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { MIME_TYPE, ReportWidget, loadPlotly } from './report';

export { MIME_TYPE };

/** The renderer: a ReportWidget reading `model.data[MIME_TYPE]`. */
export class ArgusReportRenderer extends ReportWidget implements IRenderMime.IRenderer {
  constructor(private _options: IRenderMime.IRendererOptions) {
    super();
    this.addClass('jp-ArgusReportRenderer');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    await this.setReport(model.data[this._options.mimeType], loadPlotly());
  }
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [MIME_TYPE],
  defaultRank: 0,
  createRenderer: options => new ArgusReportRenderer(options)
};

const extension: IRenderMime.IExtension = {
  id: 'argus-lab:report',
  rendererFactory,
  rank: 0,
  dataType: 'json',
  fileTypes: [
    {
      name: 'argus-report',
      mimeTypes: [MIME_TYPE],
      extensions: ['.argus.json']
    }
  ],
  documentWidgetFactoryOptions: {
    name: 'Argus report',
    primaryFileType: 'argus-report',
    fileTypes: ['argus-report'],
    defaultFor: ['argus-report']
  }
};

export default extension;
