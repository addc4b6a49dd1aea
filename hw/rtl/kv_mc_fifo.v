/*

pynq-kv: synchronous first-word-fall-through FIFO of the memcached front-end

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * A plain valid/ready FIFO: DEPTH words in a RAM (LUT RAM or block RAM, read
 * synchronously) plus one output register, so it holds DEPTH + 1 words.  A
 * word written at clock edge n is on m_* after edge n+2 at the earliest.
 * s_ready is low only when the RAM is full; m_valid is high whenever a word
 * is available.
 */
module kv_mc_fifo #
(
    // Word width in bits: >= 1
    parameter WIDTH = 32,
    // RAM depth in words: a power of two, >= 2
    parameter DEPTH = 16
)
(
    input  wire              clk,
    input  wire              rst,

    input  wire [WIDTH-1:0]  s_data,
    input  wire              s_valid,
    output wire              s_ready,

    output wire [WIDTH-1:0]  m_data,
    output wire              m_valid,
    input  wire              m_ready
);

localparam AW = $clog2(DEPTH);

// check configuration
initial begin
    if (WIDTH < 1) begin
        $error("Error: WIDTH must be at least 1 (instance %m)");
        $finish;
    end
    if (DEPTH < 2 || (1 << AW) != DEPTH) begin
        $error("Error: DEPTH must be a power of two, at least 2 (instance %m)");
        $finish;
    end
end

reg [WIDTH-1:0] mem [0:DEPTH-1];
reg [AW:0] wr_ptr_reg;
reg [AW:0] rd_ptr_reg;
reg [WIDTH-1:0] out_data_reg;
reg out_valid_reg;

wire full = wr_ptr_reg == {~rd_ptr_reg[AW], rd_ptr_reg[AW-1:0]};
wire empty = wr_ptr_reg == rd_ptr_reg;
wire wr = s_valid && !full;
wire rd = !empty && (!out_valid_reg || m_ready);

assign s_ready = !full;
assign m_data = out_data_reg;
assign m_valid = out_valid_reg;

always @(posedge clk) begin
    if (wr) begin
        mem[wr_ptr_reg[AW-1:0]] <= s_data;
    end
    if (rd) begin
        out_data_reg <= mem[rd_ptr_reg[AW-1:0]];
    end
end

always @(posedge clk) begin
    if (wr) begin
        wr_ptr_reg <= wr_ptr_reg + 1'b1;
    end
    if (rd) begin
        rd_ptr_reg <= rd_ptr_reg + 1'b1;
        out_valid_reg <= 1'b1;
    end else if (m_ready) begin
        out_valid_reg <= 1'b0;
    end
    if (rst) begin
        wr_ptr_reg <= {AW+1{1'b0}};
        rd_ptr_reg <= {AW+1{1'b0}};
        out_valid_reg <= 1'b0;
    end
end

endmodule

`resetall
