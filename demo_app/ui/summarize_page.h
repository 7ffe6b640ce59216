// The Summarize page: a document (opened, dropped or pasted: text, Markdown or source), its size in tokens against the
// context, the instruction and generation settings, Summarize / Stop / Compare, and the streamed summary.
#pragma once

#include <QWidget>

class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace demo {

class OutputView;

class SummarizePage : public QWidget {
    Q_OBJECT
public:
    explicit SummarizePage(QWidget *parent = nullptr);

    OutputView *output() const { return output_; }
    QString document() const;
    QString instruction() const;
    QString document_path() const { return path_; }
    // Reads a UTF-8 text file into the editor; false and *error when it cannot.
    bool open_document(const QString &path, QString *error);
    void choose_document();

    int n_predict() const;
    double temperature() const;
    quint64 seed() const;
    void set_generation(int n_predict, double temperature, quint64 seed);

    void set_token_count(int n_tokens, int n_ctx, int room);
    void set_running(bool running);
    void set_prompt_note(const QString &note);

signals:
    void summarizeRequested();
    void compareRequested();
    void stopRequested();
    void documentChanged();
    void openFailed(const QString &message);

protected:
    void dragEnterEvent(QDragEnterEvent *event) override;
    void dropEvent(QDropEvent *event) override;

private:
    QPlainTextEdit *document_;
    QLineEdit *instruction_;
    QLabel *tokens_, *note_;
    QSpinBox *n_predict_;
    QDoubleSpinBox *temperature_;
    QSpinBox *seed_;
    QPushButton *summarize_, *stop_, *compare_;
    OutputView *output_;
    QString path_;
};

}  // namespace demo
